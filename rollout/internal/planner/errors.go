package planner

import "errors"

// BlockedError is a state of the cluster that forbids the next step (a member down, quorum at stake, no
// leader); nothing was changed for it. It unwraps to ErrBlocked.
type BlockedError struct {
	// Reason says what blocks, with the members as etcd and the pods describe them.
	Reason string
}

func (e *BlockedError) Error() string { return ErrBlocked.Error() + ": " + e.Reason }

func (e *BlockedError) Unwrap() error { return ErrBlocked }

// ErrSingleMember is wrapped (with ErrBlocked: nothing was changed) when the StatefulSet has one member: its
// restart stops every read and write until it is back (quorum 1 of 1), which no waiting changes, so the run
// and the preview refuse at once rather than after the ready timeout (issue 34).
var ErrSingleMember = errors.New("a one-member etcd cannot restart without stopping writes")

// ErrLearnerLeftBehind is wrapped (with ErrBlocked: nothing was changed) when etcd's member list has a learner
// that no replacement of this rollout added: no waiting promotes it, so the run and the preview refuse at once
// (issue 34, item 1).
var ErrLearnerLeftBehind = errors.New("a learner nobody will promote")

// WaitingCannotFix says err is a block (ErrBlocked) that no waiting lifts: a version path etcd refuses, a
// one-member etcd without consent, a learner nobody will promote, a member problem named in the block itself
// (a certificate every member's met alike). The run returns it at once instead of
// holding for its ready timeout.
func WaitingCannotFix(err error) bool {
	var named *MemberProblemError // a block that is itself a member's problem no holding cures (sharedCertRefusal)
	return errors.Is(err, ErrVersionPath) || errors.Is(err, ErrSingleMember) || errors.Is(err, ErrLearnerLeftBehind) ||
		errors.As(err, &named) && named.Reason.WaitingCannotFix()
}
