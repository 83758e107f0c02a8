package statefulset

import (
	"context"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// WatchLagLimit is how long a reader waits for the watch to deliver the engine's own last partition write
// before it reads the StatefulSet with a GET instead. An event normally follows a write within
// milliseconds; a watch that takes longer is being re-established, and a GET is the answer meanwhile.
const WatchLagLimit = time.Second

// ReadPod reads a member pod from the watch's cache when it can answer, else with a GET. A pod the cache
// knows to be absent is a NotFound error, as a GET would return.
func (h *Handle) ReadPod(ctx context.Context, name string) (*corev1.Pod, error) {
	pod, exists, ok := h.Watch.Pod(name)
	switch {
	case ok && exists:
		return pod.DeepCopy(), nil
	case ok:
		return nil, apierrors.NewNotFound(corev1.Resource("pods"), name)
	}
	return h.Kube.CoreV1().Pods(h.Namespace).Get(ctx, name, metav1.GetOptions{})
}

// WatchLag tracks, for one waiter, since when the cache has been behind the engine's own last write.
type WatchLag struct {
	// Since is when the cache was first seen behind; zero while it is not.
	Since time.Time
}

// waiting says whether to keep waiting for the watch rather than GET: it has been behind for less than
// WatchLagLimit.
func (l *WatchLag) waiting() bool {
	if l.Since.IsZero() {
		l.Since = time.Now()
	}
	return time.Since(l.Since) < WatchLagLimit
}

func (l *WatchLag) caughtUp() { l.Since = time.Time{} }

// FromWatch is the cached StatefulSet once the cache has seen at least minGen. pending is set
// while the cache is usable but behind, for up to WatchLagLimit: the caller waits for the next event. With
// neither, the caller reads with a GET.
func (h *Handle) FromWatch(minGen int64, lag *WatchLag) (sts *appsv1.StatefulSet, pending bool) {
	minGen = max(minGen, h.wrote.Load())
	if sts, ok := h.Watch.StatefulSet(minGen); ok {
		lag.caughtUp()
		return sts.DeepCopy(), false
	}
	return nil, h.Watch.Ready() && lag.waiting()
}
