package provider

import (
	"fmt"
	"time"

	"github.com/etcd-rollout/pulumi-etcd-rollout/rollout"
)

// recordFailure keeps the engine's account of a member that failed its gates in the state, and forgets it
// once a run completes: a failure is worth a warning only until the cluster has moved past it.
func recordFailure(st *RolloutState, res rollout.Result, complete bool) {
	switch {
	case complete:
		st.LastFailure = nil
	case res.Failure != nil:
		f := res.Failure
		st.LastFailure = &RolloutFailure{
			Member: f.Pod, Revision: f.Revision, Gate: f.Gate, LastSeen: truncate(f.LastSeen, 500),
			At: f.At.UTC().Format(time.RFC3339), RevertedTo: f.RevertedTo, RevertError: truncate(f.RevertError, 500),
		}
	}
}

// lastFailureWarning is what the preview after a failed run says next to the plan, so nobody re-runs a
// known-bad template without knowing it. Re-running it is allowed.
func lastFailureWarning(f RolloutFailure) string {
	return fmt.Sprintf("last attempt of revision %s failed on %s at %s (the %s gate: %s); it was %s. "+
		"Applying the same template again will fail the same way unless its cause is fixed",
		f.Revision, f.Member, f.At, f.Gate, f.LastSeen, rollout.FailureOutcome(f.RevertedTo, f.RevertError))
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}
