// Package memberwatch keeps a StatefulSet and its pods in an informer cache while a run holds the lease, so
// that the engine's gates read them without an API request each and wake the moment a pod changes.
package memberwatch

import (
	"context"
	"errors"
	"sync"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
)

// Watch keeps the StatefulSet and its pods in an informer cache while a run holds the lease.
//
// Why: a gate used to GET the StatefulSet and the pod every poll, and the port-forward dialer GET the pod
// behind every etcd call; a 3-member rollout made some 190 API requests, most of them these reads, and the
// gates noticed a recreated or Ready pod only at their next poll. A watch per resource costs two to four
// requests for the whole run (one each with client-go's streaming list, plus a LIST each without), and its
// events wake a gate the moment the pod changes.
//
// The cache is only an optimisation: whoever reads it falls back to a GET while it is not synced, when
// list or watch is refused (an older Role grants only get), or while it is suspect (a list or watch failed,
// or a stream ended, and no new stream has delivered since). A cache also lags the engine's own writes; the
// readers in internal/statefulset (handle_watch.go) deal with that.
type Watch struct {
	kube      kubernetes.Interface
	namespace string
	sts       string

	mu sync.Mutex
	// started is set by the first start; uid is the StatefulSet the pod selector was taken from.
	started bool
	uid     types.UID
	stop    chan struct{}
	stsInf  cache.SharedIndexInformer
	podInf  cache.SharedIndexInformer
	// changed is closed, and replaced, on every event: a broadcast to every gate waiting for one.
	changed chan struct{}
	// refused is set when the API server refused list or watch; the watch has stopped for good.
	refused  error
	reported bool
	// suspect is set when a list or watch failed or a watch stream ended (an API server restart): until a
	// stream delivers again the cache may be behind, and readers GET instead (watch_stream.go).
	suspect bool
}

// New is a watch of StatefulSet sts in namespace and its pods; Start begins it.
func New(kube kubernetes.Interface, namespace, sts string) *Watch {
	return &Watch{kube: kube, namespace: namespace, sts: sts, changed: make(chan struct{})}
}

// Start begins watching the StatefulSet (by name) and its pods (by the StatefulSet's pod selector, which
// the API server keeps immutable). Only the first call does anything; it returns at once, and the cache is
// used once it has synced.
func (w *Watch) Start(sts *appsv1.StatefulSet) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.started || sts == nil {
		return
	}
	podSelector := ""
	if sts.Spec.Selector != nil {
		sel, err := metav1.LabelSelectorAsSelector(sts.Spec.Selector)
		if err != nil {
			return // the API server would not have accepted it; stay with GETs
		}
		podSelector = sel.String()
	}
	w.started, w.uid, w.stop = true, sts.UID, make(chan struct{})
	byName := fields.OneTermEqualSelector("metadata.name", w.sts).String()
	stsList := w.listWatch(
		func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) {
			o.FieldSelector = byName
			return w.kube.AppsV1().StatefulSets(w.namespace).List(ctx, o)
		},
		func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
			o.FieldSelector = byName
			return w.kube.AppsV1().StatefulSets(w.namespace).Watch(ctx, o)
		})
	podList := w.listWatch(
		func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) {
			o.LabelSelector = podSelector
			return w.kube.CoreV1().Pods(w.namespace).List(ctx, o)
		},
		func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
			o.LabelSelector = podSelector
			return w.kube.CoreV1().Pods(w.namespace).Watch(ctx, o)
		})
	w.stsInf = cache.NewSharedIndexInformer(stsList, &appsv1.StatefulSet{}, 0, cache.Indexers{})
	w.podInf = cache.NewSharedIndexInformer(podList, &corev1.Pod{}, 0, cache.Indexers{})
	notify := cache.ResourceEventHandlerFuncs{
		AddFunc:    func(any) { w.notify() },
		UpdateFunc: func(any, any) { w.notify() },
		DeleteFunc: func(any) { w.notify() },
	}
	for _, inf := range []cache.SharedIndexInformer{w.stsInf, w.podInf} {
		// Both only fail once the informer runs, which it does not yet.
		_, _ = inf.AddEventHandler(notify)
		_ = inf.SetWatchErrorHandler(w.failed)
		go inf.Run(w.stop)
	}
}

// notify wakes every waiter.
func (w *Watch) notify() {
	w.mu.Lock()
	defer w.mu.Unlock()
	close(w.changed)
	w.changed = make(chan struct{})
}

// failed hears every list or watch error. A refusal is final: the watch stops and readers GET from then
// on. Anything else (the API server away) makes the cache suspect until a stream delivers again; the
// reflector re-lists or re-watches by itself.
func (w *Watch) failed(_ *cache.Reflector, err error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if apierrors.IsForbidden(err) || apierrors.IsUnauthorized(err) {
		if w.refused == nil {
			w.refused = err
			close(w.stop)
		}
		return
	}
	w.suspect = true
}

// Changes is closed at the next event.
func (w *Watch) Changes() <-chan struct{} {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.changed
}

// usable says the cache may be read: synced, not refused, not suspect. Called with mu held.
func (w *Watch) usable() bool {
	return w.started && w.refused == nil && !w.suspect && w.stsInf.HasSynced() && w.podInf.HasSynced()
}

// Ready says the cache may be read now.
func (w *Watch) Ready() bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.usable()
}

// StatefulSet is the cached StatefulSet once the cache has seen at least generation minGen (the engine's
// own last write). ok is false when the cache cannot answer that: not usable, behind, or without the
// StatefulSet (the caller's GET then says whether it is really gone).
func (w *Watch) StatefulSet(minGen int64) (sts *appsv1.StatefulSet, ok bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if !w.usable() {
		return nil, false
	}
	sts, ok = w.cachedStatefulSet()
	if !ok || sts.Generation < minGen {
		return nil, false
	}
	return sts, true
}

// cachedStatefulSet reads the store. Called with mu held.
func (w *Watch) cachedStatefulSet() (*appsv1.StatefulSet, bool) {
	obj, exists, err := w.stsInf.GetStore().GetByKey(w.namespace + "/" + w.sts)
	if err != nil || !exists {
		return nil, false
	}
	sts, ok := obj.(*appsv1.StatefulSet)
	return sts, ok
}

// Pod is the cached pod; exists is false when the cache knows it does not exist. ok is false when the
// cache cannot say: not usable, or the StatefulSet is not the one whose selector the pods are watched by
// (deleted and created again).
func (w *Watch) Pod(name string) (pod *corev1.Pod, exists, ok bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if !w.usable() {
		return nil, false, false
	}
	if sts, found := w.cachedStatefulSet(); !found || sts.UID != w.uid {
		return nil, false, false
	}
	obj, exists, err := w.podInf.GetStore().GetByKey(w.namespace + "/" + name)
	if err != nil {
		return nil, false, false
	}
	if !exists {
		return nil, false, true
	}
	pod, isPod := obj.(*corev1.Pod)
	return pod, isPod, isPod
}

// LookupPod is the port-forward dialer's view of a pod (memberdial.WithPodLookup): found only when the cache
// can say and the pod exists.
func (w *Watch) LookupPod(namespace, name string) (*corev1.Pod, bool) {
	if namespace != w.namespace {
		return nil, false
	}
	pod, exists, ok := w.Pod(name)
	return pod, ok && exists
}

// Refusal returns, once, why the API server refused the watch: the engine says so in its progress.
func (w *Watch) Refusal() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.refused == nil || w.reported {
		return nil
	}
	w.reported = true
	return w.refused
}

// Close stops the informers; a closed watch is never started again.
func (w *Watch) Close() {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.refused == nil {
		w.refused, w.reported = errWatchClosed, true
		if w.started {
			close(w.stop)
		}
	}
	w.started = true
}

var errWatchClosed = errors.New("watch closed")
