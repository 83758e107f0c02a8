package harness_test

import (
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/etcd-rollout/pulumi-etcd-rollout/tests/harness"
)

// A put cut short by the recorder's own stop is unknown to the checker but not the cluster's failure: a test
// asserting that no put failed (quorum held) must not fail on the put in flight when it stopped recording.
func TestSummarizeHistoryCountsPutsCutByStopApart(t *testing.T) {
	ok := harness.HistoryOp{Kind: harness.OpPut, Outcome: harness.OutcomeOK}
	read := harness.HistoryOp{Kind: harness.OpGet, Outcome: harness.OutcomeOK}
	failed := harness.HistoryOp{Kind: harness.OpPut, Outcome: harness.OutcomeUnknown, Err: "context deadline exceeded"}
	stopped := harness.HistoryOp{Kind: harness.OpPut, Outcome: harness.OutcomeUnknown, Err: "context canceled", Stopped: true}
	tests := []struct {
		name string
		ops  []harness.HistoryOp
		want harness.HistorySummary
	}{
		{"nothing failed", []harness.HistoryOp{ok, read, ok}, harness.HistorySummary{Puts: 2, Gets: 1}},
		{"cut by stop only", []harness.HistoryOp{ok, stopped, stopped}, harness.HistorySummary{Puts: 1, Stopped: 2}},
		{"a failure and a stop", []harness.HistoryOp{failed, ok, stopped}, harness.HistorySummary{Puts: 1, Unknown: 1, Stopped: 1}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			assert.Equal(t, tt.want, harness.SummarizeHistory(tt.ops))
		})
	}
}
