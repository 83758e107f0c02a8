package main

import (
	"sort"
	"strings"
	"time"

	"github.com/etcd-rollout/pulumi-etcd-rollout/tests/harness"
)

// ClientStats is what the background client saw during one rollout (from the load's start to its stop).
type ClientStats struct {
	Writes       int           `json:"writes"`
	FailedWrites int           `json:"failedWrites"`
	Reads        int           `json:"reads"`
	FailedReads  int           `json:"failedReads"`
	WorstGap     time.Duration `json:"worstGap"` // longest time between two successful writes' completions
	P99Write     time.Duration `json:"p99Write"`
	MaxWrite     time.Duration `json:"maxWrite"`
	P99Read      time.Duration `json:"p99Read"`
	// WriteErrors counts the failed puts by error message, to tell a stalled leader (deadline exceeded)
	// from a connection cut by a stopping member (unavailable).
	WriteErrors map[string]int `json:"writeErrors,omitempty"`
}

// clientStats measures a history. The gap counts from the load's start to the first successful write and
// from the last one to the load's end too, so a client that never succeeds shows the whole span.
func clientStats(ops []harness.Op, from, to time.Time) ClientStats {
	var s ClientStats
	var writeLat, readLat []time.Duration
	var ends []time.Time
	for _, op := range ops {
		switch op.Kind {
		case harness.OpPut:
			s.Writes++
			if !op.OK {
				s.FailedWrites++
				if s.WriteErrors == nil {
					s.WriteErrors = map[string]int{}
				}
				s.WriteErrors[shortError(op.Err)]++
				continue
			}
			writeLat = append(writeLat, op.Latency)
			ends = append(ends, op.End)
		case harness.OpGet:
			s.Reads++
			if !op.OK {
				s.FailedReads++
				continue
			}
			readLat = append(readLat, op.Latency)
		}
	}
	sort.Slice(ends, func(i, j int) bool { return ends[i].Before(ends[j]) })
	prev := from
	for _, e := range ends {
		s.WorstGap = max(s.WorstGap, e.Sub(prev))
		prev = e
	}
	if to.After(prev) {
		s.WorstGap = max(s.WorstGap, to.Sub(prev))
	}
	s.P99Write, s.MaxWrite = percentile(writeLat, 0.99), percentile(writeLat, 1)
	s.P99Read = percentile(readLat, 0.99)
	return s
}

// percentile is the nearest-rank percentile q (0 < q <= 1) of ds; 0 for none.
func percentile(ds []time.Duration, q float64) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	sorted := append([]time.Duration(nil), ds...)
	sort.Slice(sorted, func(i, j int) bool { return sorted[i] < sorted[j] })
	rank := int(q*float64(len(sorted))+0.999999) - 1
	return sorted[min(max(rank, 0), len(sorted)-1)]
}

// shortError keeps the part of a gRPC error that names what happened.
func shortError(msg string) string {
	if i := strings.Index(msg, "desc = "); i >= 0 {
		msg = msg[i+len("desc = "):]
	}
	if len(msg) > 80 {
		msg = msg[:80]
	}
	return msg
}
