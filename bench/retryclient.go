package main

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strconv"
	"sync"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
)

// The second background client behaves like a production client: it knows every member, and a put that fails
// on one member is sent again, unchanged, to the next one until it succeeds or its deadline passes. A write
// only counts as failed when no attempt succeeded in time. Today's client (harness.Load: one clientv3 client,
// a 500 ms timeout, no retry of ours) counts every attempt that failed; this one counts what an application
// with an ordinary retry loop would have lost.

// RetryPolicy shapes the retries of one write.
type RetryPolicy struct {
	// AttemptTimeout bounds one put on one member (the same 500 ms as today's client).
	AttemptTimeout time.Duration
	// Deadline bounds the whole write, every attempt and pause included.
	Deadline time.Duration
	// Backoff is the pause before each retry, so members that all refuse at once are not hammered.
	Backoff time.Duration
}

// defaultRetryPolicy is what the bench runs with.
var defaultRetryPolicy = RetryPolicy{AttemptTimeout: 500 * time.Millisecond, Deadline: 5 * time.Second,
	Backoff: 25 * time.Millisecond}

// putFunc puts key=value through the member of index endpoint.
type putFunc func(ctx context.Context, endpoint int, key, value string) error

// RetryWrite is one write of the retrying client: every attempt it took.
type RetryWrite struct {
	Start    time.Time `json:"start"`
	End      time.Time `json:"end"`
	OK       bool      `json:"ok"`
	Attempts int       `json:"attempts"`
	// Endpoint is the member index of the last attempt (the one that succeeded, when OK).
	Endpoint int `json:"endpoint"`
	// Errors are the failed attempts' errors, in order (shortened).
	Errors []string `json:"errors,omitempty"`
}

// TimeToSuccess is how long the write took from its first attempt to its success.
func (w RetryWrite) TimeToSuccess() time.Duration { return w.End.Sub(w.Start) }

// putWithRetry writes key=value, starting on member first and moving to the next member after every failed
// attempt, until an attempt succeeds or the policy's deadline (or ctx) ends the write. Every attempt sends
// the same key and value, so an attempt that timed out but committed anyway is harmless.
func putWithRetry(ctx context.Context, put putFunc, endpoints, first int, key, value string, p RetryPolicy) RetryWrite {
	w := RetryWrite{Start: time.Now(), Endpoint: first}
	wctx, cancel := context.WithTimeout(ctx, p.Deadline)
	defer cancel()
	for ep := first; ; ep = (ep + 1) % endpoints {
		if w.Attempts > 0 {
			select {
			case <-wctx.Done():
			case <-time.After(p.Backoff):
			}
		}
		if wctx.Err() != nil {
			break
		}
		actx, acancel := context.WithTimeout(wctx, p.AttemptTimeout)
		err := put(actx, ep, key, value)
		acancel()
		w.Attempts++
		w.Endpoint = ep
		if err == nil {
			w.OK = true
			break
		}
		w.Errors = append(w.Errors, shortError(err.Error()))
	}
	w.End = time.Now()
	return w
}

// RetryLoad is the retrying client's writer: one write at a time, a pause between writes, each write to the
// same key with a fresh value (its sequence number). It stays on the member that last succeeded, as a client
// with a pinned endpoint does, and moves on when an attempt fails.
type RetryLoad struct {
	cancel context.CancelFunc
	wg     sync.WaitGroup
	mu     sync.Mutex
	writes []RetryWrite
}

// StartRetryLoad writes through put (endpoints members) every interval until Stop or ctx ends.
func StartRetryLoad(ctx context.Context, put putFunc, endpoints int, key string, interval time.Duration, p RetryPolicy) *RetryLoad {
	ctx, cancel := context.WithCancel(ctx)
	l := &RetryLoad{cancel: cancel}
	l.wg.Add(1)
	go func() {
		defer l.wg.Done()
		ep := 0
		for seq := 1; ctx.Err() == nil; seq++ {
			w := putWithRetry(ctx, put, endpoints, ep, key, strconv.Itoa(seq), p)
			if ctx.Err() != nil && !w.OK {
				return // cut short by Stop: not an outcome of the cluster
			}
			if w.OK {
				ep = w.Endpoint
			} else {
				ep = (w.Endpoint + 1) % endpoints
			}
			l.mu.Lock()
			l.writes = append(l.writes, w)
			l.mu.Unlock()
			select {
			case <-ctx.Done():
			case <-time.After(interval):
			}
		}
	}()
	return l
}

// Stop ends the load and returns every write.
func (l *RetryLoad) Stop() []RetryWrite {
	l.cancel()
	l.wg.Wait()
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]RetryWrite(nil), l.writes...)
}

// memberClients is one clientv3 client per member, so that a retry is sure to go to another member (a single
// client over every endpoint lets gRPC pick the member of each call).
type memberClients []*clientv3.Client

// put is a putFunc over the members.
func (m memberClients) put(ctx context.Context, endpoint int, key, value string) error {
	if endpoint < 0 || endpoint >= len(m) {
		return fmt.Errorf("no member %d of %d", endpoint, len(m))
	}
	_, err := m[endpoint].Put(ctx, key, value)
	return err
}

func (m memberClients) Close() error {
	var errs []error
	for _, c := range m {
		errs = append(errs, c.Close())
	}
	return errors.Join(errs...)
}

// RetryClientStats is what the retrying client saw during one rollout.
type RetryClientStats struct {
	Writes       int `json:"writes"`
	FailedWrites int `json:"failedWrites"` // no attempt succeeded before the deadline
	Attempts     int `json:"attempts"`
	// Retries is Attempts minus Writes: every attempt after a write's first.
	Retries       int `json:"retries"`
	RetriedWrites int `json:"retriedWrites"` // writes that needed more than one attempt
	// WorstToSuccess is the longest a successful write took from its first attempt to its success.
	WorstToSuccess time.Duration `json:"worstToSuccess"`
	// AttemptErrors counts the failed attempts by error message.
	AttemptErrors map[string]int `json:"attemptErrors,omitempty"`
}

// retryClientStats counts writes.
func retryClientStats(ws []RetryWrite) RetryClientStats {
	var s RetryClientStats
	for _, w := range ws {
		s.Writes++
		s.Attempts += w.Attempts
		if w.Attempts > 1 {
			s.RetriedWrites++
		}
		for _, e := range w.Errors {
			if s.AttemptErrors == nil {
				s.AttemptErrors = map[string]int{}
			}
			s.AttemptErrors[e]++
		}
		if !w.OK {
			s.FailedWrites++
			continue
		}
		s.WorstToSuccess = max(s.WorstToSuccess, w.TimeToSuccess())
	}
	s.Retries = s.Attempts - s.Writes
	return s
}

// mergeRetryClientStats sums the clusters' stats; the worst time to success is the worst of any.
func mergeRetryClientStats(crs []ClusterRoll) *RetryClientStats {
	var s RetryClientStats
	seen := false
	for _, c := range crs {
		r := c.RetryClient
		if r == nil {
			continue
		}
		seen = true
		s.Writes += r.Writes
		s.FailedWrites += r.FailedWrites
		s.Attempts += r.Attempts
		s.Retries += r.Retries
		s.RetriedWrites += r.RetriedWrites
		s.WorstToSuccess = max(s.WorstToSuccess, r.WorstToSuccess)
		for k, v := range r.AttemptErrors {
			if s.AttemptErrors == nil {
				s.AttemptErrors = map[string]int{}
			}
			s.AttemptErrors[k] += v
		}
	}
	if !seen {
		return nil
	}
	return &s
}

// topErrors lists counts by message, most frequent first, at most n.
func topErrors(counts map[string]int, n int) []string {
	keys := make([]string, 0, len(counts))
	for k := range counts {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool {
		if counts[keys[i]] != counts[keys[j]] {
			return counts[keys[i]] > counts[keys[j]]
		}
		return keys[i] < keys[j]
	})
	var out []string
	for _, k := range keys[:min(n, len(keys))] {
		out = append(out, fmt.Sprintf("%d × `%s`", counts[k], k))
	}
	return out
}
