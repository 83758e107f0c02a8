package harness

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sync"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
)

// Outcome is what a client knows about one of its operations.
type Outcome string

const (
	// OutcomeOK: the cluster acknowledged the op; a put is committed, a get returned this value.
	OutcomeOK Outcome = "ok"
	// OutcomeUnknown: a put that failed or timed out. It may still commit later (an election in
	// between, a timeout after the proposal was accepted), so the checker may place it anywhere after
	// its call, or leave it out.
	OutcomeUnknown Outcome = "unknown"
)

// HistoryOp is one operation of a Recorder's history, with the wall-clock-free times the checker needs:
// Call and Return are offsets from the recorder's start on the monotonic clock.
type HistoryOp struct {
	Client  int           `json:"client"`
	Kind    OpKind        `json:"kind"`
	Key     string        `json:"key"`
	Value   string        `json:"value"` // written by a put, read by a get ("" = key absent)
	Call    time.Duration `json:"call"`
	Return  time.Duration `json:"return"` // meaningless for an unknown outcome
	Outcome Outcome       `json:"outcome"`
	Err     string        `json:"err,omitempty"`
	// Stopped marks an unknown put that failed only because the recorder was stopped while it was in
	// flight: the cluster did not fail it, so a test asserting "no put failed" must not count it.
	Stopped bool `json:"stopped,omitempty"`
}

// FailedByCluster says op is a put the cluster failed or left unanswered: of unknown outcome, and not only
// because the recorder stopped while it was in flight.
func (op HistoryOp) FailedByCluster() bool {
	return op.Kind == OpPut && op.Outcome == OutcomeUnknown && !op.Stopped
}

// RecorderOptions shape a Recorder. Zero fields take the defaults.
type RecorderOptions struct {
	Prefix   string        // keys are Prefix+"0".."Keys-1"; default "history/"
	Keys     int           // default 3: several keys keep the check fast (it runs per key)
	Clients  int           // concurrent clients, each mixing puts and gets; default 3
	Interval time.Duration // pause between two ops of one client; default 15ms
	Timeout  time.Duration // per op; default 2s
}

// Recorder is the background client of the fault tests: several goroutines doing puts of unique values and
// linearizable gets on a few keys, every outcome recorded, so CheckLinearizable can prove that no
// acknowledged write was lost and no read was stale while the cluster was being rolled and broken. A get
// that fails is not recorded (it observed nothing); a put that fails is recorded as OutcomeUnknown.
type Recorder struct {
	cancel context.CancelFunc
	wg     sync.WaitGroup
	start  time.Time
	mu     sync.Mutex
	ops    []HistoryOp
}

// StartRecorder starts the clients on cli until Stop or ctx ends. cli should reach every member, so the
// clients keep working while any one member is down.
func StartRecorder(ctx context.Context, cli *clientv3.Client, opts RecorderOptions) *Recorder {
	if opts.Prefix == "" {
		opts.Prefix = "history/"
	}
	if opts.Keys <= 0 {
		opts.Keys = 3
	}
	if opts.Clients <= 0 {
		opts.Clients = 3
	}
	if opts.Interval <= 0 {
		opts.Interval = 15 * time.Millisecond
	}
	if opts.Timeout <= 0 {
		opts.Timeout = 2 * time.Second
	}
	ctx, cancel := context.WithCancel(ctx)
	r := &Recorder{cancel: cancel, start: time.Now()}
	for c := range opts.Clients {
		r.wg.Add(1)
		go r.client(ctx, cli, opts, c)
	}
	return r
}

func (r *Recorder) client(ctx context.Context, cli *clientv3.Client, opts RecorderOptions, id int) {
	defer r.wg.Done()
	rng := rand.New(rand.NewPCG(uint64(id), uint64(r.start.UnixNano())))
	for seq := 1; ctx.Err() == nil; seq++ {
		op := HistoryOp{Client: id, Key: fmt.Sprintf("%s%d", opts.Prefix, rng.IntN(opts.Keys))}
		opCtx, cancel := context.WithTimeout(ctx, opts.Timeout)
		op.Call = time.Since(r.start)
		if rng.IntN(2) == 0 {
			op.Kind, op.Value = OpPut, fmt.Sprintf("c%d-%d", id, seq)
			_, err := cli.Put(opCtx, op.Key, op.Value)
			op.Outcome = OutcomeOK
			if err != nil {
				// Even a put cut short by Stop may have been proposed: keep it, as unknown.
				op.Outcome, op.Err, op.Stopped = OutcomeUnknown, err.Error(), ctx.Err() != nil
			}
		} else {
			op.Kind = OpGet
			resp, err := cli.Get(opCtx, op.Key) // linearizable: the default
			if err != nil {
				cancel()
				if !sleepCtx(ctx, opts.Interval) {
					return
				}
				continue
			}
			op.Outcome = OutcomeOK
			if len(resp.Kvs) > 0 {
				op.Value = string(resp.Kvs[0].Value)
			}
		}
		op.Return = time.Since(r.start)
		cancel()
		r.mu.Lock()
		r.ops = append(r.ops, op)
		r.mu.Unlock()
		if !sleepCtx(ctx, opts.Interval) {
			return
		}
	}
}

func sleepCtx(ctx context.Context, d time.Duration) bool {
	select {
	case <-ctx.Done():
		return false
	case <-time.After(d):
		return true
	}
}

// Stop ends the clients and returns the history.
func (r *Recorder) Stop() []HistoryOp {
	r.cancel()
	r.wg.Wait()
	return r.Ops()
}

// Ops returns the history recorded so far.
func (r *Recorder) Ops() []HistoryOp {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]HistoryOp(nil), r.ops...)
}

// HistorySummary counts a history, for a test log line.
type HistorySummary struct {
	Puts, Gets int
	// Unknown counts the puts the cluster failed or left unanswered within the op timeout.
	Unknown int
	// Stopped counts the puts in flight when the recorder stopped: unknown too, but not the cluster's doing.
	Stopped int
}

func (s HistorySummary) String() string {
	return fmt.Sprintf("%d acknowledged puts, %d linearizable gets, %d puts of unknown outcome, %d cut short by the recorder's stop",
		s.Puts, s.Gets, s.Unknown, s.Stopped)
}

// SummarizeHistory counts acknowledged puts and gets and puts of unknown outcome.
func SummarizeHistory(ops []HistoryOp) HistorySummary {
	var s HistorySummary
	for _, op := range ops {
		switch {
		case op.FailedByCluster():
			s.Unknown++
		case op.Outcome == OutcomeUnknown:
			s.Stopped++
		case op.Kind == OpPut:
			s.Puts++
		default:
			s.Gets++
		}
	}
	return s
}
