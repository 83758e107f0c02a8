package rollout

import (
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/watch"
)

// laggedWatch is a watch whose every event reaches its reader lag after the API server sent it, in order, as
// from an API server whose watch cache, or a network path, falls behind by seconds (issue 31, item 4). An
// event is delivered in a turn of the sequencer (named key), so a cache updated late is updated at the same
// point of every replay.
type laggedWatch struct {
	inner watch.Interface
	out   chan watch.Event
	stop  chan struct{}
	once  sync.Once
}

// stampedEvent is an event and when it is due to its reader.
type stampedEvent struct {
	ev  watch.Event
	due time.Time
}

// lagged wraps inner so that its events arrive lag late; w.mu is held.
func (w *world) lagged(inner watch.Interface, lag time.Duration, key string) watch.Interface {
	lw := &laggedWatch{inner: inner, out: make(chan watch.Event, 1024), stop: make(chan struct{})}
	stamped := make(chan stampedEvent, 1024)
	go func() { // stamps each event as it is sent, so a burst is not delayed once per event
		defer close(stamped)
		for ev := range inner.ResultChan() {
			stamped <- stampedEvent{ev: ev, due: time.Now().Add(lag)}
		}
	}()
	go func() {
		defer close(lw.out)
		for s := range stamped {
			select {
			case <-time.After(time.Until(s.due)):
			case <-lw.stop:
				return
			}
			w.serialize(key, func() { lw.out <- s.ev })
		}
	}()
	return lw
}

func (lw *laggedWatch) ResultChan() <-chan watch.Event { return lw.out }

func (lw *laggedWatch) Stop() {
	lw.once.Do(func() {
		close(lw.stop)
		lw.inner.Stop()
	})
}
