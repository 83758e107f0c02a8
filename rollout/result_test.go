package rollout

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

// A run refused before its end says the term it started with rather than a term of 0 after it.
func TestSummaryOfARunThatReadNoTermAfter(t *testing.T) {
	r := Result{UpdateRevision: "rev-b", TermBefore: 3}
	assert.Contains(t, r.Summary(), "(raft term 3 at the start; not read after)")
	r.TermAfter = 4
	assert.Contains(t, r.Summary(), "(raft term 3 → 4)")
}

// The election count is a number only when the run's own terms and transfers explain every rise: unknown, with
// why, when a term was not read, when a move of its own cannot be told from an election, or when another run
// took the lease over and moved the leader within this run's measurement (the schedule checker's seeds 3298,
// 3581 and 9952 of 10,000).
func TestCountElections(t *testing.T) {
	tests := []struct {
		name    string
		res     Result
		want    int
		unknown string
	}{
		{"measured", Result{TermBefore: 2, TermAfter: 5, LeaderTransfers: 2}, 1, ""},
		{"never below 0", Result{TermBefore: 2, TermAfter: 3, LeaderTransfers: 2}, 0, ""},
		{"no term after", Result{TermBefore: 2}, 0, "no raft term read at the start or the end"},
		{"a move of unknown outcome", Result{TermBefore: 2, TermAfter: 4, movesUnknown: 1}, 0, "1 leader move answered with an error"},
		{"the lease taken over", Result{TermBefore: 2, TermAfter: 4, leaseTakenBy: "run-b"}, 0, "run-b took the lease over during this run"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tt.res.countElections()
			assert.Equal(t, tt.want, tt.res.UnplannedElections)
			assert.Equal(t, tt.unknown != "", tt.res.ElectionsUnknown)
			assert.Contains(t, tt.res.ElectionsUnknownWhy, tt.unknown)
		})
	}
}
