package memberwatch

import (
	"context"
	"sync"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/tools/cache"
)

// listWatch is the informer's access to one resource, with every watch stream it opens tracked by w.
//
// Why track the streams: when the API server goes away, client-go re-opens the watch by itself, backing
// off for up to 30 s, and tells nobody; meanwhile the cache keeps what it had, and a run reading it would
// take a StatefulSet changed during the outage for the one it last saw. So from the moment a stream ends
// until a new one delivers something (an event or a bookmark), the cache is suspect and readers GET.
func (w *Watch) listWatch(list func(context.Context, metav1.ListOptions) (runtime.Object, error),
	open func(context.Context, metav1.ListOptions) (watch.Interface, error)) cache.ListerWatcher {
	return cache.ToListWatcherWithWatchListSemantics(&cache.ListWatch{
		ListWithContextFunc: list,
		WatchFuncWithContext: func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
			in, err := open(ctx, o)
			if err != nil {
				return nil, err
			}
			return w.track(in), nil
		},
	}, w.kube)
}

// trackedStream passes a watch stream through, telling the Watch when items flow and when it ends.
type trackedStream struct {
	in   watch.Interface
	out  chan watch.Event
	stop chan struct{}
	once sync.Once
}

func (w *Watch) track(in watch.Interface) watch.Interface {
	t := &trackedStream{in: in, out: make(chan watch.Event), stop: make(chan struct{})}
	go func() {
		defer close(t.out)
		defer w.streamEnded()
		for ev := range in.ResultChan() {
			w.streamFlowing()
			select {
			case t.out <- ev:
			case <-t.stop:
				return
			}
		}
	}()
	return t
}

func (t *trackedStream) ResultChan() <-chan watch.Event { return t.out }

func (t *trackedStream) Stop() {
	t.once.Do(func() {
		close(t.stop)
		t.in.Stop()
	})
}

// streamEnded makes the cache suspect: what happens before the next stream delivers may be missed.
func (w *Watch) streamEnded() {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.suspect = true
}

// streamFlowing clears suspicion: a stream delivers again, and the API server sends what was missed first.
func (w *Watch) streamFlowing() {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.suspect = false
}
