package rollout

import (
	"fmt"
	"slices"
	"time"

	"github.com/etcd-rollout/pulumi-etcd-rollout/rollout/internal/planner"
)

// Summary is the one-line account of a run, for logs and the CLI.
func (r Result) Summary() string {
	took := r.FinishedAt.Sub(r.StartedAt)
	if r.FinishedAt.IsZero() {
		took = time.Since(r.StartedAt)
	}
	rolled := "no member rolled"
	if n := len(r.MembersRolled); n > 0 {
		rolled = fmt.Sprintf("%s rolled (%v)", planner.Plural(n, "member", "members"), r.MembersRolled)
	}
	// A run that stopped before its end read no term after: it says the term it started with, not "→ 0".
	term := fmt.Sprintf("raft term %d → %d", r.TermBefore, r.TermAfter)
	if r.TermAfter == 0 {
		term = fmt.Sprintf("raft term %d at the start; not read after", r.TermBefore)
	}
	elections := planner.Plural(r.UnplannedElections, "unplanned election", "unplanned elections")
	if r.ElectionsUnknown {
		elections = "unplanned elections unknown: " + r.ElectionsUnknownWhy
	}
	line := fmt.Sprintf("%s to revision %s in %s; %s; %s (%s)", rolled, r.UpdateRevision,
		took.Round(100*time.Millisecond), planner.Plural(r.LeaderTransfers, "leader transfer", "leader transfers"),
		elections, term)
	if r.APIRequests > 0 {
		line += "; " + planner.Plural(r.APIRequests, "API request", "API requests")
	}
	switch {
	case r.Snapshot != nil:
		line += "; snapshot " + r.Snapshot.Location
	case r.SnapshotSkipped != "":
		line += "; NO snapshot (proceedWithoutSnapshot)"
	}
	if o := r.WriteOutage; o != nil {
		line += "; " + o.String()
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

// countElections sets UnplannedElections from the terms read at the start and the end, or ElectionsUnknown
// when either is missing: raft terms only rise, so every rise that is not one of our transfers is an election
// nobody planned.
//
// A leader move whose answer was lost while the leadership went elsewhere (movesUnknown) may have cost a term
// of ours or none: the count is unknown then, not a guess either way (the schedule checker's seed 95 of 1,000,
// once lost MoveLeader answers were drawn: such a move was counted as an election).
func (r *Result) countElections() {
	switch {
	case r.TermBefore == 0 || r.TermAfter == 0:
		r.UnplannedElections, r.ElectionsUnknown = 0, true
		r.ElectionsUnknownWhy = "no raft term read at the start or the end"
	case r.leaseTakenBy != "":
		// The schedule checker's seeds 3298, 3581 and 9952 of 10,000: the run that took the lease over moved the
		// leader within this run's measurement, and this run counted that move as an election.
		r.UnplannedElections, r.ElectionsUnknown = 0, true
		r.ElectionsUnknownWhy = r.leaseTakenBy + " took the lease over during this run, and its leader moves cannot be told from elections"
	case r.movesUnknown > 0:
		r.UnplannedElections, r.ElectionsUnknown = 0, true
		r.ElectionsUnknownWhy = fmt.Sprintf("%s answered with an error while the leadership went elsewhere: a move of ours and an election cannot be told apart",
			planner.Plural(r.movesUnknown, "leader move", "leader moves"))
	case r.WriteOutage != nil && r.WriteOutage.Elections < 0:
		r.UnplannedElections, r.ElectionsUnknown = 0, true
		r.ElectionsUnknownWhy = "the only member's raft term after its restart could not be read, so its own election cannot be told from others"
	default:
		r.ElectionsUnknown, r.ElectionsUnknownWhy = false, ""
		// The only member's restart costs it an election, which the consent accepted (WriteOutage): not unplanned.
		var own int
		if r.WriteOutage != nil {
			own = r.WriteOutage.Elections
		}
		r.UnplannedElections = max(0, int(r.TermAfter)-int(r.TermBefore)-r.LeaderTransfers-own)
	}
}

// reportRolled records a member that passed its gates on the new revision. A member rolled a second time in
// one run (someone else deleted its pod after it passed, with the partition locked, so the controller brought
// it back on the old revision) is reported once, where it was rolled last: MembersRolled names members, and
// its length is what the summary counts.
func (r *Result) reportRolled(t MemberTiming) {
	r.unreport(t.Pod)
	r.MembersRolled = append(r.MembersRolled, t.Pod)
	r.Members = append(r.Members, t)
}

// unreport takes pod out of the members reported rolled: it did not stay up on the new revision.
func (r *Result) unreport(pod string) {
	r.MembersRolled = slices.DeleteFunc(r.MembersRolled, func(p string) bool { return p == pod })
	r.Members = slices.DeleteFunc(r.Members, func(m MemberTiming) bool { return m.Pod == pod })
}
