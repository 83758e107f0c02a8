package harness

import (
	"context"
	"fmt"
	"sync"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
)

// RetryingWriter is the background writer of an application with an ordinary retry loop (the bench's
// retrying client, issue 31): each write is one put of a fresh value, sent again after a failed attempt until
// one succeeds or the write's deadline passes. Only a write no attempt got through in time has failed: the
// measure of "no failed write" in the tests, where the Recorder's single attempts count every member restart
// a connection happened to be on.
type RetryingWriter struct {
	cancel context.CancelFunc
	wg     sync.WaitGroup
	mu     sync.Mutex
	writes int
	failed []string // the last error of each failed write
}

// RetryPolicy shapes one write of a RetryingWriter: the bench's policy is 500 ms per attempt, 25 ms between
// attempts, 5 s for the whole write.
type RetryPolicy struct {
	AttemptTimeout, Backoff, Deadline time.Duration
}

// StartRetryingWriter writes key through cli every interval until Stop or ctx ends.
func StartRetryingWriter(ctx context.Context, cli *clientv3.Client, key string, interval time.Duration, p RetryPolicy) *RetryingWriter {
	ctx, cancel := context.WithCancel(ctx)
	w := &RetryingWriter{cancel: cancel}
	w.wg.Add(1)
	go func() {
		defer w.wg.Done()
		for seq := 1; sleepCtx(ctx, interval); seq++ {
			err := putRetrying(ctx, cli, key, fmt.Sprint(seq), p)
			if ctx.Err() != nil {
				return // cut short by Stop: neither written nor failed
			}
			w.mu.Lock()
			w.writes++
			if err != nil {
				w.failed = append(w.failed, err.Error())
			}
			w.mu.Unlock()
		}
	}()
	return w
}

// putRetrying puts key=value until an attempt succeeds or p.Deadline passes; it returns the last attempt's
// error when none succeeded. Every attempt sends the same value, so one that timed out but committed is
// harmless.
func putRetrying(ctx context.Context, cli *clientv3.Client, key, value string, p RetryPolicy) error {
	wctx, cancel := context.WithTimeout(ctx, p.Deadline)
	defer cancel()
	var last error
	for attempt := 0; ; attempt++ {
		if attempt > 0 && !sleepCtx(wctx, p.Backoff) {
			return fmt.Errorf("no attempt of %d succeeded within %s: %w", attempt, p.Deadline, last)
		}
		actx, acancel := context.WithTimeout(wctx, p.AttemptTimeout)
		_, last = cli.Put(actx, key, value)
		acancel()
		if last == nil {
			return nil
		}
	}
}

// Stop ends the writer and returns how many writes it made and the errors of those that failed.
func (w *RetryingWriter) Stop() (writes int, failed []string) {
	w.cancel()
	w.wg.Wait()
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.writes, append([]string(nil), w.failed...)
}
