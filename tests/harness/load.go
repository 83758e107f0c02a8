package harness

import (
	"context"
	"fmt"
	"strconv"
	"sync"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"golang.org/x/sync/errgroup"
)

// Preload writes keys keys of valueSize bytes under prefix, 100 puts per transaction, so that a member
// restarted later has real catching up to do. It returns the revision after the last write.
func Preload(ctx context.Context, cli *clientv3.Client, prefix string, keys, valueSize int) (int64, error) {
	const perTxn = 100 // below etcd's default --max-txn-ops (128)
	value := string(make([]byte, valueSize))
	var mu sync.Mutex
	var rev int64
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(4)
	for start := 0; start < keys; start += perTxn {
		g.Go(func() error {
			ops := make([]clientv3.Op, 0, perTxn)
			for i := start; i < min(start+perTxn, keys); i++ {
				ops = append(ops, clientv3.OpPut(fmt.Sprintf("%s%08d", prefix, i), value))
			}
			resp, err := cli.Txn(gctx).Then(ops...).Commit()
			if err != nil {
				return fmt.Errorf("preloading keys %d-%d under %q: %w", start, start+len(ops)-1, prefix, err)
			}
			mu.Lock()
			rev = max(rev, resp.Header.Revision)
			mu.Unlock()
			return nil
		})
	}
	return rev, g.Wait()
}

// OpKind is what an Op did.
type OpKind string

const (
	OpPut OpKind = "put"
	OpGet OpKind = "get"
)

// Op is one operation of a Load, as a history for latency statistics and linearizability checks: Client
// tells the writer (0) from the reader (1); Value is what a put wrote or a get read ("" for a missing key).
// An op with an error may or may not have taken effect (a put that timed out can still commit).
type Op struct {
	Client   int
	Kind     OpKind
	Key      string
	Value    string
	Start    time.Time
	End      time.Time
	Latency  time.Duration
	OK       bool
	Err      string
	Revision int64
}

// LoadOptions shape a Load. Zero fields take the defaults.
type LoadOptions struct {
	Key      string        // the one key written and read; default "load/key"
	Interval time.Duration // pause between two ops of one goroutine; default 10ms
	Timeout  time.Duration // per op; default 500ms: an op that waits for an election fails
	NoReads  bool          // writer only
}

// Load is a background writer and reader on one long-lived client connection. Each put writes a fresh value
// (its sequence number) with a short timeout and no retry of ours; each get is linearizable. Stop returns
// the history.
type Load struct {
	cancel context.CancelFunc
	wg     sync.WaitGroup
	mu     sync.Mutex
	ops    []Op
}

// StartLoad starts writing and reading through cli until Stop or ctx ends.
func StartLoad(ctx context.Context, cli *clientv3.Client, opts LoadOptions) *Load {
	if opts.Key == "" {
		opts.Key = "load/key"
	}
	if opts.Interval == 0 {
		opts.Interval = 10 * time.Millisecond
	}
	if opts.Timeout == 0 {
		opts.Timeout = 500 * time.Millisecond
	}
	ctx, cancel := context.WithCancel(ctx)
	l := &Load{cancel: cancel}
	l.wg.Add(1)
	go l.loop(ctx, opts, 0, func(ctx context.Context, seq int) Op {
		v := strconv.Itoa(seq)
		op := Op{Client: 0, Kind: OpPut, Key: opts.Key, Value: v}
		resp, err := cli.Put(ctx, opts.Key, v)
		if err == nil {
			op.Revision = resp.Header.Revision
		}
		return finish(op, err)
	})
	if !opts.NoReads {
		l.wg.Add(1)
		go l.loop(ctx, opts, 1, func(ctx context.Context, _ int) Op {
			op := Op{Client: 1, Kind: OpGet, Key: opts.Key}
			resp, err := cli.Get(ctx, opts.Key)
			if err == nil {
				op.Revision = resp.Header.Revision
				if len(resp.Kvs) > 0 {
					op.Value = string(resp.Kvs[0].Value)
				}
			}
			return finish(op, err)
		})
	}
	return l
}

func finish(op Op, err error) Op {
	op.OK = err == nil
	if err != nil {
		op.Err = err.Error()
	}
	return op
}

func (l *Load) loop(ctx context.Context, opts LoadOptions, client int, do func(context.Context, int) Op) {
	defer l.wg.Done()
	for seq := 1; ctx.Err() == nil; seq++ {
		opCtx, cancel := context.WithTimeout(ctx, opts.Timeout)
		start := time.Now()
		op := do(opCtx, seq)
		cancel()
		if ctx.Err() != nil && !op.OK {
			return // cut short by Stop: not an outcome of the cluster
		}
		op.Start, op.End = start, time.Now()
		op.Latency = op.End.Sub(start)
		l.mu.Lock()
		l.ops = append(l.ops, op)
		l.mu.Unlock()
		select {
		case <-ctx.Done():
		case <-time.After(opts.Interval):
		}
	}
}

// Stop ends the load and returns every op, ordered by start time per client (writer first).
func (l *Load) Stop() []Op {
	l.cancel()
	l.wg.Wait()
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]Op(nil), l.ops...)
}

// Ops returns the ops recorded so far.
func (l *Load) Ops() []Op {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]Op(nil), l.ops...)
}

// LoadSummary counts a history.
type LoadSummary struct {
	Ops, Failed int
	MaxLatency  time.Duration
}

// Summarize counts ops and failures and finds the slowest successful op.
func Summarize(ops []Op) LoadSummary {
	var s LoadSummary
	for _, op := range ops {
		s.Ops++
		if !op.OK {
			s.Failed++
		} else if op.Latency > s.MaxLatency {
			s.MaxLatency = op.Latency
		}
	}
	return s
}
