package rollout

import (
	"context"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// watchLagLimit is how long a reader waits for the watch to deliver the engine's own last partition write
// before it reads the StatefulSet with a GET instead. An event normally follows a write within
// milliseconds; a watch that takes longer is being re-established, and a GET is the answer meanwhile.
const watchLagLimit = time.Second

// startWatch starts the StatefulSet's watch (memberwatch.go) once a run holds the lease: a run looks many times,
// while a one-off look (Plan, preview, status) would pay a LIST and a WATCH per resource for nothing.
func (e *Engine) startWatch(sts *appsv1.StatefulSet) {
	if _, held := e.lease.HeldSince(); held {
		e.watch.start(sts)
	}
}

// reportWatchRefusal says once that the API server refused the watch, and what that costs.
func (e *Engine) reportWatchRefusal() {
	if err := e.watch.refusal(); err != nil {
		e.emit(Step{}, "watching StatefulSet %s and its pods was refused (%v): reading them with get instead; grant list and watch on statefulsets and pods (deploy/rbac/role.yaml) to spare the API server that load",
			e.cfg.StatefulSet, err)
	}
}

// readPod reads a member pod from the watch's cache when it can answer, else with a GET. A pod the cache
// knows to be absent is a NotFound error, as a GET would return.
func (e *Engine) readPod(ctx context.Context, name string) (*corev1.Pod, error) {
	pod, exists, ok := e.watch.pod(name)
	switch {
	case ok && exists:
		return pod.DeepCopy(), nil
	case ok:
		return nil, apierrors.NewNotFound(corev1.Resource("pods"), name)
	}
	return e.kube.CoreV1().Pods(e.cfg.Namespace).Get(ctx, name, metav1.GetOptions{})
}

// watchLag tracks, for one waiter, since when the cache has been behind the engine's own last write.
type watchLag struct{ since time.Time }

// waiting says whether to keep waiting for the watch rather than GET: it has been behind for less than
// watchLagLimit.
func (l *watchLag) waiting() bool {
	if l.since.IsZero() {
		l.since = time.Now()
	}
	return time.Since(l.since) < watchLagLimit
}

func (l *watchLag) caughtUp() { l.since = time.Time{} }

// statefulSetFromWatch is the cached StatefulSet once the cache has seen at least minGen. pending is set
// while the cache is usable but behind, for up to watchLagLimit: the caller waits for the next event. With
// neither, the caller reads with a GET.
func (e *Engine) statefulSetFromWatch(minGen int64, lag *watchLag) (sts *appsv1.StatefulSet, pending bool) {
	minGen = max(minGen, e.wroteGeneration.Load())
	if sts, ok := e.watch.statefulSet(minGen); ok {
		lag.caughtUp()
		return sts.DeepCopy(), false
	}
	return nil, e.watch.ready() && lag.waiting()
}
