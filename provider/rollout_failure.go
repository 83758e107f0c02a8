package provider

import (
	"errors"
	"fmt"
	"strings"
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
			Member: f.Pod, Revision: f.Revision, Gate: f.Gate, LastSeen: rollout.Truncate(f.LastSeen, 500),
			At: f.At.UTC().Format(time.RFC3339), RevertedTo: f.RevertedTo, RevertError: rollout.Truncate(f.RevertError, 500),
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

// failureReason is the error a stopped run leaves in `pulumi up`: its first line says what happened, to which
// member, what the run did about it and what to do (failureHeadline); the lines after it are the run's whole
// account. A run stopped for a reason without a headline keeps the one-line account.
func failureReason(target string, rolled []string, runErr error, last *RolloutFailure) string {
	account := fmt.Sprintf("rollout of %s stopped before any member was rolled: %v", target, runErr)
	if len(rolled) > 0 {
		account = fmt.Sprintf("rollout of %s stopped after %d member(s) (%s): %v", target, len(rolled), strings.Join(rolled, ", "), runErr)
	}
	if headline := failureHeadline(target, runErr, last); headline != "" {
		return headline + "\n" + account
	}
	return account
}

// failureHeadline is the first line for the failures people meet most: a revision that failed and was
// reverted, a member not healthy in time, a cluster whose quorum blocks the next restart, another run holding
// the lease, and someone else's write to the StatefulSet. It reads the engine's typed errors, never its text.
func failureHeadline(target string, err error, last *RolloutFailure) string {
	var (
		reverted *rollout.RevertedError
		gate     *rollout.GateTimeoutError
		blocked  *rollout.BlockedError
		locked   *rollout.LockedError
		stranger *rollout.InterferenceError
	)
	switch {
	case errors.As(err, &locked):
		return fmt.Sprintf("%s: another rollout holds lease %s (%s, renewed %s ago), so nothing was changed: "+
			"wait for it to finish, or if it is gone, run pulumi up again after %s",
			target, locked.Lease, locked.Holder, time.Since(locked.Renewed).Round(time.Second), locked.ExpiresIn.Round(time.Second))
	case errors.As(err, &stranger):
		return fmt.Sprintf("%s was changed by someone else (%s) before %s, so nothing was written and %s: "+
			"find who changed it and why, then run pulumi up again to roll to its current template",
			target, stranger.Who(), stranger.Action, lockState(err))
	case errors.As(err, &reverted):
		return fmt.Sprintf("%s failed the %s gate on revision %s (last seen: %s) and was reverted to %s; %s, so no other member restarts: "+
			"fix the pod template (%s's events and logs from the failed start say why), then run pulumi up again",
			reverted.Pod, reverted.Cause.Gate, reverted.From, lastSeen(reverted.Cause), reverted.To, lockState(err), reverted.Pod)
	case errors.As(err, &gate):
		return fmt.Sprintf("%s %s (last seen: %s); %s; %s, so no other member restarts: "+
			"look at %s (its events and logs), fix the template or the member, then run pulumi up again",
			gate.Pod, gateFailure(gate), lastSeen(gate), notReverted(gate.Pod, last), lockState(err), gate.Pod)
	case errors.As(err, &blocked):
		return fmt.Sprintf("%s: no member was restarted for this step because %s; %s: "+
			"bring the members back to health (or wait until they are), then run pulumi up again", target, blocked.Reason, lockState(err))
	}
	return ""
}

// gateFailure says how a member failed its gate, without its name.
func gateFailure(g *rollout.GateTimeoutError) string {
	if !g.PassedAt.IsZero() {
		return fmt.Sprintf("passed the %s gate at %s, then did not stay healthy", g.Gate, g.PassedAt.Format("15:04:05"))
	}
	return fmt.Sprintf("did not pass the %s gate within %s", g.Gate, g.Timeout)
}

// lastSeen is what the engine last saw of a member, shortened for a headline (the account after it is whole).
func lastSeen(g *rollout.GateTimeoutError) string {
	if g.LastSeen == "" {
		return "nothing"
	}
	return rollout.Truncate(g.LastSeen, 240)
}

// notReverted says why a member that failed its gate was not brought back, from the failure the run recorded.
func notReverted(pod string, last *RolloutFailure) string {
	if last != nil && last.Member == pod && last.RevertedTo == "" {
		return "it was " + rollout.FailureOutcome("", rollout.Truncate(last.RevertError, 200))
	}
	return "it was not reverted"
}

// lockState says whether the run left the partition locked, which every exit does unless its re-lock failed
// or another run holds the lease now (rollout.ErrPartitionNotLocked).
func lockState(err error) string {
	if errors.Is(err, rollout.ErrPartitionNotLocked) {
		return "the partition may still be lowered (the next pulumi up re-locks it first; `etcd-rollout unlock` does it now)"
	}
	return "the partition is locked"
}
