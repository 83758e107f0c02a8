package main

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"

	"github.com/etcd-rollout/pulumi-etcd-rollout/tests/harness"
)

func TestClientStats(t *testing.T) {
	t0 := time.Date(2026, 11, 29, 0, 0, 0, 0, time.UTC)
	put := func(startMS, latMS int, ok bool) harness.Op {
		s := t0.Add(time.Duration(startMS) * time.Millisecond)
		return harness.Op{Kind: harness.OpPut, Start: s, End: s.Add(time.Duration(latMS) * time.Millisecond),
			Latency: time.Duration(latMS) * time.Millisecond, OK: ok}
	}
	tests := []struct {
		name       string
		ops        []harness.Op
		to         int
		wantGap    time.Duration
		wantFailed int
	}{
		{"steady", []harness.Op{put(0, 5, true), put(15, 5, true), put(30, 5, true)}, 40, 15 * time.Millisecond, 0},
		{"stall with failures", []harness.Op{put(0, 5, true), put(15, 500, false), put(525, 500, false), put(1035, 5, true)}, 1050,
			1035 * time.Millisecond, 2},
		{"no success at all: the whole span", []harness.Op{put(0, 500, false)}, 800, 800 * time.Millisecond, 1},
		{"silence at the end counts", []harness.Op{put(0, 5, true)}, 300, 295 * time.Millisecond, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := clientStats(tt.ops, t0, t0.Add(time.Duration(tt.to)*time.Millisecond))
			assert.Equal(t, tt.wantGap, s.WorstGap)
			assert.Equal(t, tt.wantFailed, s.FailedWrites)
		})
	}
}

func TestPercentile(t *testing.T) {
	var ds []time.Duration
	for i := 1; i <= 100; i++ {
		ds = append(ds, time.Duration(i)*time.Millisecond)
	}
	assert.Equal(t, 99*time.Millisecond, percentile(ds, 0.99))
	assert.Equal(t, 100*time.Millisecond, percentile(ds, 1))
	assert.Equal(t, time.Duration(0), percentile(nil, 0.99))
}

// Two members out at once in a 3-member cluster is a quorum loss; one is not.
func TestAvailability(t *testing.T) {
	t0 := time.Date(2026, 11, 29, 0, 0, 0, 0, time.UTC)
	at := func(ms int) time.Time { return t0.Add(time.Duration(ms) * time.Millisecond) }
	samples := []Sample{
		{T: at(0), Up: [][]bool{{true, true, true}}},
		{T: at(50), Up: [][]bool{{true, true, false}}},
		{T: at(100), Up: [][]bool{{true, false, false}}},
		{T: at(150), Up: [][]bool{{true, false, false}}},
		{T: at(200), Up: [][]bool{{true, false, true}}},
		{T: at(250), Up: [][]bool{{true, true, true}}},
	}
	a := availability(samples, 0, 3)
	assert.Equal(t, []Interval{{From: at(100), To: at(200)}}, a.QuorumLost)
	assert.Equal(t, 100*time.Millisecond, a.QuorumLostFor())
	assert.Equal(t, []time.Duration{0, 150 * time.Millisecond, 150 * time.Millisecond}, a.DownFor())
}
