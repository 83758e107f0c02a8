package rollout

import (
	"fmt"
	"time"
)

// Summary is the one-line account of a run, for logs and the CLI.
func (r Result) Summary() string {
	took := r.FinishedAt.Sub(r.StartedAt)
	if r.FinishedAt.IsZero() {
		took = time.Since(r.StartedAt)
	}
	rolled := "no member rolled"
	if n := len(r.MembersRolled); n > 0 {
		rolled = fmt.Sprintf("%s rolled (%v)", plural(n, "member", "members"), r.MembersRolled)
	}
	// A run that stopped before its end read no term after: it says the term it started with, not "→ 0".
	term := fmt.Sprintf("raft term %d → %d", r.TermBefore, r.TermAfter)
	if r.TermAfter == 0 {
		term = fmt.Sprintf("raft term %d at the start; not read after", r.TermBefore)
	}
	line := fmt.Sprintf("%s to revision %s in %s; %s; %s (%s)", rolled, r.UpdateRevision,
		took.Round(100*time.Millisecond), plural(r.LeaderTransfers, "leader transfer", "leader transfers"),
		plural(r.UnplannedElections, "unplanned election", "unplanned elections"), term)
	if r.APIRequests > 0 {
		line += "; " + plural(r.APIRequests, "API request", "API requests")
	}
	return line
}

// FailureOutcome says what became of a failed member, from a Failure's RevertedTo and RevertError, in the
// words the CLI summary and the next preview use.
func FailureOutcome(revertedTo, revertError string) string {
	switch {
	case revertedTo != "":
		return "reverted to " + revertedTo
	case revertError != "":
		return "not reverted: " + revertError
	}
	return "left as it is (onFailure: stop)"
}
