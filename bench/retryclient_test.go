package main

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// fakeMembers is a putFunc whose answer depends on the member and the attempt: "ok", "fail" (an error at
// once, like a connection reset) or "hang" (no answer until the attempt's context ends, like a stalled
// member). It records every attempt.
type fakeMembers struct {
	mu sync.Mutex
	// answer gives the behaviour of the n-th attempt (0-based, over the fake's life) on member ep.
	answer   func(n, ep int) string
	attempts []fakeAttempt
}

type fakeAttempt struct {
	Endpoint   int
	Key, Value string
}

func (f *fakeMembers) put(ctx context.Context, ep int, key, value string) error {
	f.mu.Lock()
	n := len(f.attempts)
	f.attempts = append(f.attempts, fakeAttempt{ep, key, value})
	f.mu.Unlock()
	switch f.answer(n, ep) {
	case "ok":
		return nil
	case "hang":
		<-ctx.Done()
		return ctx.Err()
	default:
		return errors.New("rpc error: code = Unavailable desc = connection reset by peer")
	}
}

func (f *fakeMembers) endpoints() []int {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []int
	for _, a := range f.attempts {
		out = append(out, a.Endpoint)
	}
	return out
}

func TestPutWithRetry(t *testing.T) {
	policy := RetryPolicy{AttemptTimeout: 20 * time.Millisecond, Deadline: 150 * time.Millisecond, Backoff: time.Millisecond}
	seq := func(answers ...string) func(n, ep int) string {
		return func(n, _ int) string {
			if n < len(answers) {
				return answers[n]
			}
			return answers[len(answers)-1]
		}
	}
	tests := []struct {
		name          string
		answer        func(n, ep int) string
		first         int
		policy        RetryPolicy
		wantOK        bool
		wantEndpoints []int // every attempt's member; nil: not checked
		minAttempts   int
		wantErrors    []string
		minTook       time.Duration // the write took at least this long
		maxTook       time.Duration // and at most this long
	}{
		{name: "first attempt succeeds", answer: seq("ok"), wantOK: true, wantEndpoints: []int{0}, minAttempts: 1,
			maxTook: 100 * time.Millisecond},
		{name: "a reset connection is retried on the next member", answer: seq("fail", "ok"), wantOK: true,
			wantEndpoints: []int{0, 1}, minAttempts: 2,
			wantErrors: []string{"connection reset by peer"}, maxTook: 100 * time.Millisecond},
		{name: "the next member after the last is the first", answer: seq("fail", "ok"), first: 2, wantOK: true,
			wantEndpoints: []int{2, 0}, minAttempts: 2, maxTook: 100 * time.Millisecond},
		{name: "a stalled member costs one attempt timeout, then the next member answers", answer: seq("hang", "ok"),
			wantOK: true, wantEndpoints: []int{0, 1}, minAttempts: 2, wantErrors: []string{"context deadline exceeded"},
			minTook: 20 * time.Millisecond, maxTook: 120 * time.Millisecond},
		{name: "members that refuse and members that stall alike: the write fails at its deadline", answer: func(_, ep int) string {
			if ep == 1 {
				return "fail"
			}
			return "hang"
		}, first: 1, wantOK: false, minAttempts: 4, minTook: 150 * time.Millisecond, maxTook: 300 * time.Millisecond},
		{name: "no member answers in time: one failed write, many attempts, over all members in turn",
			answer: seq("fail"), wantOK: false, minAttempts: 6, minTook: 150 * time.Millisecond, maxTook: 300 * time.Millisecond},
		{name: "a success after five stalled attempts counts, however late within the deadline", answer: seq("hang", "hang", "hang", "hang", "hang", "ok"),
			policy: RetryPolicy{AttemptTimeout: 20 * time.Millisecond, Deadline: 400 * time.Millisecond, Backoff: time.Millisecond},
			wantOK: true, wantEndpoints: []int{0, 1, 2, 0, 1, 2}, minAttempts: 6, minTook: 100 * time.Millisecond,
			maxTook: 400 * time.Millisecond},
		{name: "an attempt never outlives the write's deadline", answer: seq("hang"),
			policy: RetryPolicy{AttemptTimeout: time.Second, Deadline: 40 * time.Millisecond, Backoff: time.Millisecond},
			wantOK: false, wantEndpoints: []int{0}, minAttempts: 1, minTook: 40 * time.Millisecond, maxTook: 200 * time.Millisecond},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := &fakeMembers{answer: tt.answer}
			p := policy
			if tt.policy != (RetryPolicy{}) {
				p = tt.policy
			}
			w := putWithRetry(context.Background(), f.put, 3, tt.first, "bench/probe-retry", "42", p)
			assert.Equal(t, tt.wantOK, w.OK)
			assert.Equal(t, len(f.attempts), w.Attempts, "every attempt counted")
			assert.GreaterOrEqual(t, w.Attempts, tt.minAttempts)
			if tt.wantEndpoints != nil {
				assert.Equal(t, tt.wantEndpoints, f.endpoints())
			}
			for i, ep := range f.endpoints() {
				if i > 0 {
					assert.Equal(t, (f.endpoints()[i-1]+1)%3, ep, "attempt %d goes to the next member", i)
				}
			}
			for _, a := range f.attempts {
				assert.Equal(t, fakeAttempt{a.Endpoint, "bench/probe-retry", "42"}, a, "every attempt is the same put")
			}
			if tt.wantErrors != nil {
				assert.Equal(t, tt.wantErrors, w.Errors)
			}
			if w.OK {
				assert.Len(t, w.Errors, w.Attempts-1, "one error per failed attempt")
				assert.Equal(t, f.endpoints()[len(f.endpoints())-1], w.Endpoint, "the member that succeeded")
			} else {
				assert.Len(t, w.Errors, w.Attempts)
			}
			assert.GreaterOrEqual(t, w.TimeToSuccess(), tt.minTook)
			assert.LessOrEqual(t, w.TimeToSuccess(), tt.maxTook)
		})
	}
}

// The load stays on the member that last succeeded: after one failover, later writes take one attempt.
func TestRetryLoadStaysOnTheMemberThatAnswered(t *testing.T) {
	f := &fakeMembers{answer: func(_, ep int) string {
		if ep == 0 {
			return "fail"
		}
		return "ok"
	}}
	l := StartRetryLoad(context.Background(), f.put, 3, "k", time.Millisecond,
		RetryPolicy{AttemptTimeout: 20 * time.Millisecond, Deadline: time.Second, Backoff: time.Millisecond})
	time.Sleep(40 * time.Millisecond)
	ws := l.Stop()
	require.Greater(t, len(ws), 2)
	assert.Equal(t, 2, ws[0].Attempts)
	for i, w := range ws {
		assert.True(t, w.OK, "write %d", i)
		assert.Equal(t, 1, w.Endpoint, "write %d", i)
		if i > 0 {
			assert.Equal(t, 1, w.Attempts, "write %d", i)
		}
	}
	values := map[string]bool{}
	for _, a := range f.attempts[1:] {
		assert.False(t, values[a.Value], "a fresh value per write")
		values[a.Value] = true
	}
}

// A write cut short by Stop is no outcome of the cluster.
func TestRetryLoadDropsTheWriteStopCuts(t *testing.T) {
	f := &fakeMembers{answer: func(int, int) string { return "hang" }}
	l := StartRetryLoad(context.Background(), f.put, 3, "k", time.Millisecond,
		RetryPolicy{AttemptTimeout: time.Second, Deadline: 5 * time.Second, Backoff: time.Millisecond})
	time.Sleep(20 * time.Millisecond)
	assert.Empty(t, l.Stop())
}

func TestRetryClientStats(t *testing.T) {
	t0 := time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)
	write := func(tookMS, attempts int, ok bool, errs ...string) RetryWrite {
		return RetryWrite{Start: t0, End: t0.Add(time.Duration(tookMS) * time.Millisecond), OK: ok,
			Attempts: attempts, Errors: errs}
	}
	tests := []struct {
		name   string
		writes []RetryWrite
		want   RetryClientStats
	}{
		{"none", nil, RetryClientStats{}},
		{"clean", []RetryWrite{write(3, 1, true), write(5, 1, true)},
			RetryClientStats{Writes: 2, Attempts: 2, WorstToSuccess: 5 * time.Millisecond}},
		{"a retried write is not a failed one",
			[]RetryWrite{write(3, 1, true), write(530, 2, true, "context deadline exceeded"), write(40, 2, true, "EOF")},
			RetryClientStats{Writes: 3, Attempts: 5, Retries: 2, RetriedWrites: 2, WorstToSuccess: 530 * time.Millisecond,
				AttemptErrors: map[string]int{"context deadline exceeded": 1, "EOF": 1}}},
		{"a failed write does not count as the worst time to success",
			[]RetryWrite{write(5000, 9, false, "EOF", "EOF", "EOF", "EOF", "EOF", "EOF", "EOF", "EOF", "EOF"), write(4, 1, true)},
			RetryClientStats{Writes: 2, FailedWrites: 1, Attempts: 10, Retries: 8, RetriedWrites: 1,
				WorstToSuccess: 4 * time.Millisecond, AttemptErrors: map[string]int{"EOF": 9}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			assert.Equal(t, tt.want, retryClientStats(tt.writes))
		})
	}
}

func TestMergeRetryClientStats(t *testing.T) {
	assert.Nil(t, mergeRetryClientStats([]ClusterRoll{{}, {}}), "data from before the retrying client")
	got := mergeRetryClientStats([]ClusterRoll{
		{RetryClient: &RetryClientStats{Writes: 10, Attempts: 12, Retries: 2, RetriedWrites: 1,
			WorstToSuccess: time.Second, AttemptErrors: map[string]int{"EOF": 2}}},
		{RetryClient: &RetryClientStats{Writes: 5, FailedWrites: 1, Attempts: 9, Retries: 4, RetriedWrites: 1,
			WorstToSuccess: time.Millisecond, AttemptErrors: map[string]int{"EOF": 1, "x": 3}}},
	})
	assert.Equal(t, &RetryClientStats{Writes: 15, FailedWrites: 1, Attempts: 21, Retries: 6, RetriedWrites: 2,
		WorstToSuccess: time.Second, AttemptErrors: map[string]int{"EOF": 3, "x": 3}}, got)
}
