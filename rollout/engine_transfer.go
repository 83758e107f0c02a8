package rollout

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/etcd-rollout/pulumi-etcd-rollout/rollout/internal/gate"
	"github.com/etcd-rollout/pulumi-etcd-rollout/rollout/internal/member"
	"github.com/etcd-rollout/pulumi-etcd-rollout/rollout/internal/poll"
)

// moveLeaderTimeout bounds one MoveLeader call. etcd aborts a transfer that does not finish within one
// election timeout and keeps the old leader, so a timeout here costs no election.
const moveLeaderTimeout = 10 * time.Second

// transferLeader moves leadership From → To, sending MoveLeader to the current leader as etcd requires,
// and returns once the target itself reports that it leads. moved says the leadership did move (the term rose
// by our hand), even when err then says the target was not seen leading: etcd answers MoveLeader only once the
// transferee leads, and a transferee that loses the leadership right after (it stalls, the others elect) still
// cost one term by the transfer, which the run counts as its own and not as an unplanned election.
func (e *Engine) transferLeader(ctx context.Context, permit gate.Permit, st ClusterState, step Step) (moved bool, err error) {
	from, to := st.Members[step.From], st.Members[step.To]
	if !to.Healthy || to.MemberID == 0 {
		return false, fmt.Errorf("moving leader %s → %s: target is not a healthy voter (%s)", from.Pod, to.Pod, to.Problem)
	}
	cctx, cancel := context.WithTimeout(ctx, moveLeaderTimeout)
	defer cancel()
	// The move is a disruption like a restart: it runs only while this run surely holds the lease (a move that
	// lands after another run took over would shift the leader under that run's plan).
	mctx, mcancel := permit.Within(cctx)
	defer mcancel()
	if err := e.etcd.MoveLeader(mctx, from.Pod, to.MemberID); err != nil {
		// The answer can be lost while the transfer itself went through (seen on a loaded machine: Raft moved
		// the leader within milliseconds and the call still ran into its deadline). Counting that as a
		// failure would report our own transfer as an unplanned election: ask the target first.
		// Asked on a context of its own: a run cancelled as its move went out must still count the move (the
		// schedule checker's seed 647 of 1,000: a move whose answer was lost to the cancel was reported as an
		// election).
		ask := context.WithoutCancel(ctx)
		if e.leads(ask, to) {
			e.emit(step, "MoveLeader %s → %s answered %v, but %s leads: the transfer went through", from.Pod, to.Pod, err, to.Pod)
			return true, nil
		}
		if moved, answered := e.termMovedSince(ask, st); moved || (!answered && member.AnswerLost(err)) {
			// The transfer may have gone through and the leadership moved on at once (the target stalled, the
			// others elected), or an election alone moved the term; or nobody answers to say (the schedule
			// checker's seed 5509 of 10,000: an API server outage began with the move): nobody can tell which.
			return false, fmt.Errorf("moving leader %s → %s: %w (%w)", from.Pod, to.Pod, err, errMoveOutcomeUnknown)
		}
		return false, fmt.Errorf("moving leader %s → %s: %w", from.Pod, to.Pod, err)
	}
	if _, err := poll.Until(cctx, time.Time{}, poll.Every(50*time.Millisecond), func(ctx context.Context) (struct{}, bool, error) {
		s, err := e.etcd.Status(ctx, to.Pod)
		e.heardDown(ctx, to.Pod, err)
		return struct{}{}, err == nil && s.Leader == to.MemberID, nil
	}); err != nil {
		return true, fmt.Errorf("moving leader %s → %s: %s does not report itself leader after MoveLeader returned", from.Pod, to.Pod, to.Pod)
	}
	return true, nil
}

// errMoveOutcomeUnknown marks a MoveLeader that failed while the raft term moved past the one the move was
// planned on, or whose answer was lost with no member left to say: the move may have cost a term of ours, or
// none.
var errMoveOutcomeUnknown = errors.New("whether the transfer happened is unknown")

// termMovedSince says whether some member reports a raft term above the highest in st, and whether any member
// answered at all.
func (e *Engine) termMovedSince(ctx context.Context, st ClusterState) (moved, answered bool) {
	before := maxTerm(st)
	for _, m := range st.Members {
		cctx, cancel := context.WithTimeout(ctx, memberCallTimeout)
		s, err := e.etcd.Status(cctx, m.Pod)
		cancel()
		if err == nil {
			answered = true
			moved = moved || s.RaftTerm > before
		}
	}
	return moved, answered
}

// leaderIs asks the target first, then the others, who leads; it is the last check before the partition
// is lowered, so it trusts no earlier observation.
func (e *Engine) leaderIs(ctx context.Context, st ClusterState, ordinal int) (bool, error) {
	order := []int{ordinal}
	for i := range st.Members {
		if i != ordinal {
			order = append(order, i)
		}
	}
	target := st.Members[ordinal].MemberID
	for _, i := range order {
		cctx, cancel := context.WithTimeout(ctx, memberCallTimeout)
		s, err := e.etcd.Status(cctx, st.Members[i].Pod)
		cancel()
		if err != nil || s.Leader == 0 {
			continue
		}
		if i == ordinal {
			return s.Leader == s.ID, nil
		}
		return target != 0 && s.Leader == target, nil
	}
	return false, fmt.Errorf("no member says who leads: cannot confirm %s is not the leader", st.Members[ordinal].Pod)
}

// leads says whether member m itself reports that it is the leader.
func (e *Engine) leads(ctx context.Context, m MemberState) bool {
	cctx, cancel := context.WithTimeout(ctx, memberCallTimeout)
	defer cancel()
	s, err := e.etcd.Status(cctx, m.Pod)
	e.heardDown(ctx, m.Pod, err)
	return err == nil && s.Leader == m.MemberID && s.ID == m.MemberID
}

// heardDown tells the run of a member a leader move's look found down by its own answer (a failed call that
// reached it, asked while the caller still waited): no verdict for the move, but the member did not stay up.
func (e *Engine) heardDown(ctx context.Context, pod string, err error) {
	if err != nil && !member.CouldNotLook(err) && ctx.Err() == nil && e.moveSawDown != nil {
		e.moveSawDown(pod)
	}
}
