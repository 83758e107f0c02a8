package rollout

import (
	"cmp"
	"context"
	"math/rand/v2"
	"runtime"
	"slices"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/require"
)

// sequencer serves every request a schedule's engines make (Kubernetes and etcd), one at a time, in an order
// that depends on the seed alone, not on how Go schedules goroutines.
//
// Virtual time (testing/synctest) makes a schedule independent of the machine's speed and load, but not of
// the order in which goroutines that wake at the same virtual instant run: an engine's gate loop, its lease
// renewal, its status publisher, its watch's informers, a second engine and Observe's per-member goroutines
// can all reach the world at one instant. The sequencer runs in a goroutine of its own. It serves a request
// only once every other goroutine of the bubble is durably blocked (synctest.Wait): by then every request
// of that instant has arrived and every consequence of the last one has played out (an informer has
// delivered the event the write caused, a woken gate has made its next request). Of the requests waiting it
// serves the least by its key (the engine, then what it asks and of whom), so that two runs of a seed serve
// them alike, and answers it once its consequences have played out (the watch events it caused are in the
// engines' caches).
//
// What is left to the Go runtime is a select with more than one case ready at the same instant (a poll's
// timer and a deadline falling together), which Go breaks at random; TestSchedulesReplayAlike measures it.
type sequencer struct {
	requests chan *seqRequest
	done     chan struct{}
	ended    chan struct{}
	// latency, when set, is how long a request sent now takes to reach the API server (0: at once); it is
	// asked in the sequencer's turn only, so its draws come in the seed's order (schedule.APILatency).
	latency func(key string) time.Duration
	// inflight counts the requests on their way (delays): stopSequencer waits for them to land, so that none
	// is left asleep when the schedule's bubble ends (seed 26801 of the long mode: a one-member run refused at
	// once, while its watch's first List was still on its way, and the bubble ended under it).
	inflight sync.WaitGroup
}

// seqRequest is one request waiting for its turn: do runs it, in the sequencer's goroutine; late says it
// arrives after a latency, sent at an earlier turn. sendable, for a request that may be delayed, says whether
// it is sent at all (its caller's context has not ended), asked at its first turn.
type seqRequest struct {
	key      string
	do       func(late bool)
	sendable func() bool
	late     bool
	served   chan struct{}
}

// startSequencer starts serving w's requests; it must be called inside the schedule's synctest bubble.
func (w *world) startSequencer() {
	q := &sequencer{requests: make(chan *seqRequest), done: make(chan struct{}), ended: make(chan struct{})}
	if w.s.APILatency {
		rng := rand.New(rand.NewPCG(w.s.Seed, latencyStream))
		q.latency = func(string) time.Duration {
			if rng.IntN(3) > 0 {
				return 0
			}
			return time.Duration(1+rng.Int64N(int64(maxLatency/time.Microsecond)-1)) * time.Microsecond
		}
	}
	w.order = q
	go q.serve()
}

// stopSequencer ends the sequencer once every engine has returned; later requests run in their caller.
func (w *world) stopSequencer() {
	if q := w.order; q != nil {
		close(q.done)
		<-q.ended
		q.inflight.Wait()
		w.order = nil
	}
}

// serialize runs do as w's request named key: through the sequencer when one runs, else at once.
func (w *world) serialize(key string, do func()) {
	w.enqueue(&seqRequest{key: key, do: func(bool) { do() }})
}

// serializeRequest runs do as an engine's request named key, sent on ctx: in a schedule with API latency it
// may reach the world later than it was sent (late), and is not sent once ctx has ended.
func (w *world) serializeRequest(ctx context.Context, key string, do func(late bool)) {
	w.enqueue(&seqRequest{key: key, do: do, sendable: func() bool { return ctx.Err() == nil }})
}

func (w *world) enqueue(r *seqRequest) {
	q := w.order
	if q == nil {
		r.do(false)
		return
	}
	r.served = make(chan struct{})
	select {
	case q.requests <- r:
		<-r.served
	case <-q.ended:
		r.do(false)
	}
}

func (q *sequencer) serve() {
	defer close(q.ended)
	var waiting []*seqRequest
	for {
		if len(waiting) == 0 {
			select {
			case r := <-q.requests:
				waiting = append(waiting, r)
			case <-q.done:
				return
			}
		}
		synctest.Wait()
		waiting = q.collect(waiting)
		slices.SortStableFunc(waiting, func(a, b *seqRequest) int { return cmp.Compare(a.key, b.key) })
		next := waiting[0]
		waiting = waiting[1:]
		if q.delays(next) {
			continue
		}
		next.do(next.late)
		// The request's consequences play out before its answer does: a watch event it caused reaches the
		// informers' caches before the requester reads them (a cache read is no request, so nothing else would
		// order the two).
		synctest.Wait()
		close(next.served)
	}
}

// delays sends r on its way with the latency drawn for it, if any: it comes back as a request of its own
// once it arrives, and is served then (late).
func (q *sequencer) delays(r *seqRequest) bool {
	if q.latency == nil || r.late || r.sendable == nil || !r.sendable() {
		return false
	}
	d := q.latency(r.key)
	if d <= 0 {
		return false
	}
	r.late = true
	q.inflight.Add(1)
	go func() {
		defer q.inflight.Done()
		time.Sleep(d)
		select {
		case q.requests <- r:
		case <-q.ended:
			r.do(true)
			close(r.served)
		}
	}()
	return true
}

// collect adds every request that has arrived meanwhile (their senders are blocked on the channel).
func (q *sequencer) collect(waiting []*seqRequest) []*seqRequest {
	for {
		select {
		case r := <-q.requests:
			waiting = append(waiting, r)
		default:
			return waiting
		}
	}
}

// TestSchedulesReplayAlike plays seeds twice, the second time while a busy loop keeps the machine's cores
// occupied, and wants the same account, line for line: what TestSchedules prints for a failing seed is what its
// replay command shows on any machine. It fails when something the schedules depend on is left to the Go
// runtime or the clock again (a map's order, a goroutine's, a real timer).
func TestSchedulesReplayAlike(t *testing.T) {
	seeds := 40
	if testing.Short() {
		seeds = 10
	}
	play := func(seed uint64) []string {
		var w *world
		synctest.Test(t, func(t *testing.T) { w = runSchedule(t, generateSchedule(seed, allEventKinds)) })
		return w.lines
	}
	for seed := uint64(1); seed <= uint64(seeds); seed++ {
		first := play(seed)
		stop := make(chan struct{})
		for range runtime.GOMAXPROCS(0) {
			go func() {
				for {
					select {
					case <-stop:
						return
					default:
					}
				}
			}()
		}
		second := play(seed)
		close(stop)
		require.Equal(t, first, second, "seed %d played out otherwise the second time", seed)
	}
}
