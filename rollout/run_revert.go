package rollout

import (
	"context"
	"errors"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/etcd-rollout/pulumi-etcd-rollout/rollout/internal/gate"
	"github.com/etcd-rollout/pulumi-etcd-rollout/rollout/internal/member"
	"github.com/etcd-rollout/pulumi-etcd-rollout/rollout/internal/planner"
	"github.com/etcd-rollout/pulumi-etcd-rollout/rollout/internal/procedure/revert"
)

// onMemberFailure is where a member that did not pass its gates on the new revision ends up: the failure is
// recorded in the Result (the next preview names it), and unless the policy is FailureStop the member is
// reverted, so the cluster is back on N healthy members rather than left on N-1 until a person acts. Other
// errors, and any error once the caller has given up, pass through unchanged.
func (r *run) onMemberFailure(ctx context.Context, err error) error {
	var gate *GateTimeoutError
	if !errors.As(err, &gate) {
		return err
	}
	e := r.e
	ordinal, ok := planner.OrdinalOf(e.cfg.StatefulSet, gate.Pod)
	if !ok {
		return err
	}
	// The peers' word counts only for a look that never reached the member (a refusal is its own answer: a
	// client port the revision misconfigured fails the revision) and only for a pod the kubelet kept Ready,
	// never restarted (a crash-looping member is a connected peer between its crashes).
	if ctx.Err() == nil && gate.Unreached && gate.PodStayedUp {
		if peer := r.votesWithoutAnsweringUs(ctx, ordinal); peer != "" {
			return fmt.Errorf("%w: %s stopped answering us (%s), but %s reports it as a connected Raft peer: it votes, so it is no verdict on the revision and nothing is reverted or deleted; the partition is locked: check its client port (the revision's listen-client-urls and TLS settings) and the port-forward path to it (API server, kubelet), then run again",
				ErrMemberUnseen, gate.Pod, gate.LastSeen, peer)
		}
	}
	// A member that did not stay up is not rolled, whatever becomes of it now, and its revision proved
	// nothing: members that passed on one look because of it pass no more so.
	if _, passed := r.passed[ordinal]; passed {
		r.takeBack(ordinal, "%s is no longer counted passed: it did not stay up after it passed", gate.Pod)
	}
	delete(r.passed, ordinal)
	e.proven.Remove(r.startRev)
	for i, p := range r.passed {
		if p.oneLook {
			delete(r.passed, i) // unproven again: it counts for no quorum a delete needs
			r.unproven[i] = p
		}
	}
	if ctx.Err() != nil {
		return err
	}
	failure := &Failure{Pod: gate.Pod, Revision: r.startRev, Gate: gate.Gate, LastSeen: gate.LastSeen, At: time.Now()}
	r.res.Failure = failure
	if e.cfg.OnFailure == FailureStop {
		return err
	}
	if ordinal < len(r.last.Members) && planner.Replaced(r.last, ordinal) {
		// Deleting its pod would not bring back its old revision with its data: its data dies with the pod.
		failure.RevertError = "its data dies with its pod: a revert would be another replacement"
		return fmt.Errorf("%w; %s is not reverted: its data dies with its pod, so deleting it would be another replacement, not a restart onto the old revision; the partition is locked: fix the template and run again (the member is replaced onto it)", err, gate.Pod)
	}
	to, rerr := revert.Revert(ctx, &reverting{runSteps{r}}, ordinal)
	if rerr != nil {
		failure.RevertError = rerr.Error()
		return fmt.Errorf("%w; %s was not reverted: %w", err, gate.Pod, rerr)
	}
	failure.RevertedTo = to
	reverted := &RevertedError{Pod: gate.Pod, From: r.startRev, To: to, Cause: gate}
	e.announce(Event{Kind: EventMemberReverted, Step: Step{Kind: StepRecreate, Ordinal: ordinal}, Pod: gate.Pod}, "%v", reverted)
	e.record(ctx, r.uid, corev1.EventTypeWarning, ReasonMemberReverted, Truncate(reverted.Error(), 1000))
	return reverted
}

// votesWithoutAnsweringUs names a healthy member that reports ordinal as a connected Raft peer while ordinal
// itself does not answer us ("" when it answers, when nobody says so, or when its member ID is unknown): a
// client port that refuses us, or a port-forward that fails, while the member votes. Such a member is unknown
// to us, not out, and its failed looks are no verdict on the revision.
func (r *run) votesWithoutAnsweringUs(ctx context.Context, ordinal int) string {
	e := r.e
	st, err := r.observe(ctx)
	if err != nil || ordinal >= len(st.Members) || st.Members[ordinal].Reachable {
		return ""
	}
	id := r.memberIDs[ordinal]
	if id == 0 {
		return ""
	}
	var voter string
	e.askHealthyOthers(ctx, st, ordinal, func(ctx context.Context, pod string) bool {
		if peers, err := e.etcd.ActivePeers(ctx, pod); err == nil && peers[id] {
			voter = pod
		}
		return voter != ""
	})
	return voter
}

// revertSafety says whether the failed member's pod may be deleted now, and where the leader must go first
// (-1: nowhere). Not answering us is not being out: a member whose client port refuses us, whose forward
// fails, or whose read times out while it catches up may still vote, and lead. So the rule is a roll's,
// whatever the member answers: the others must keep a quorum without it by etcd's word (podDeleteSafety);
// one that answers and leads hands the leadership over first.
func revertSafety(st ClusterState, ordinal int, outageAccepted bool) (moveLeaderTo int, err error) {
	m := st.Members[ordinal]
	if err := podDeleteSafety(st, ordinal, outageAccepted); err != nil {
		return -1, fmt.Errorf("not reverting %s: %w", m.Pod, err)
	}
	if !m.Healthy || !m.IsLeader || st.Replicas == 1 {
		return -1, nil
	}
	for i, other := range st.Members {
		if i != ordinal && other.Healthy {
			return i, nil
		}
	}
	return -1, fmt.Errorf("not reverting %s: it leads and no other member is healthy to take over", m.Pod)
}

// podDeleteSafety is the rule for every pod the engine deletes (a revert, the revival of a member down on an
// older revision, the restart of one already down): the other members must keep a quorum on their own by
// etcd's word (healthy: a linearizable read through each passed), and the member must not be the leader as
// far as anyone can tell. A member that leads and answers is moved off first by the caller (revertSafety);
// one that does not answer us but that the others follow (its ID is the leader they name, or they name a
// leader no member we reach is) is refused: deleting it would cost an election.
func podDeleteSafety(st ClusterState, ordinal int, outageAccepted bool) error {
	m := st.Members[ordinal]
	if err := planner.CheckQuorum(st, ordinal, outageAccepted); err != nil {
		return err
	}
	if m.Reachable {
		return nil
	}
	reached := map[uint64]bool{}
	for _, o := range st.Members {
		if o.Reachable && o.MemberID != 0 {
			reached[o.MemberID] = true
		}
	}
	for _, o := range st.Members {
		if o.Ordinal != ordinal && o.Reachable && o.LeaderID != 0 && !reached[o.LeaderID] {
			return fmt.Errorf("%w: %s does not answer us, and %s follows leader %x, which is no member that answers: it may be %s, and deleting its pod would cost an election",
				ErrBlocked, m.Pod, o.Pod, o.LeaderID, m.Pod)
		}
	}
	return nil
}

// anotherFailedMemberDown keeps a revert to one member disrupted at a time: it refuses while another member on
// a revision a rollout restarted it onto (any but the current one: the failed revision, or a template before it)
// is down too (the schedule checker's seed 69166 of 100,000: etcd-2, rolled onto the template before and crashed
// there, was down while a revert deleted etcd-4). A member down on the current revision is left to the quorum
// rule, as every delete leaves it.
func anotherFailedMemberDown(st ClusterState, ordinal int) error {
	m := st.Members[ordinal]
	if !m.PodExists || m.Revision == st.CurrentRevision {
		return nil
	}
	for _, o := range st.Members {
		if o.Ordinal == ordinal || o.Revision == st.CurrentRevision || o.Healthy || o.Unseen {
			continue
		}
		on := "on revision " + o.Revision
		if o.Revision == st.UpdateRevision {
			on = "also " + on
		}
		return fmt.Errorf("%w: %s, %s, is not healthy either (%s); not deleting a second member's pod: the partition is locked, bring the cluster back by hand (apply the previous template, then run again)",
			ErrBlocked, o.Pod, on, o.Problem)
	}
	return nil
}

// deleteOnAFreshLook deletes the pod of the member that decided saw, under the gate's DeletePod permit, which
// judges it on a look at the cluster taken right before the delete: the observation the decision was made on
// may be seconds old by then (leader moves, the ControllerRevision read, the point-of-no-return check), and a
// member that passed may have fallen meanwhile. The schedule checker found a revert that deleted etcd-1 while
// etcd-2 crash-looped, on a look taken before etcd-2 fell. rule is the caller's own rule on the fresh look,
// which the gate judges before the quorum rule every delete keeps (podDeleteSafety) and the lease. A
// watchBefore that is not empty says what is about to happen ("reverting etcd-1"): the gate first watches
// every other member on the failed revision stay up (othersOnTheFailedRevisionStayUp), and the fresh look
// finds each still in the process it stayed up in.
func (r *run) deleteOnAFreshLook(ctx context.Context, decided ClusterState, ordinal int, rule func(ClusterState, int) error, watchBefore string) error {
	g := &gateChecks{onFreshLook: rule, watchBefore: watchBefore}
	step := Step{Kind: StepRecreate, Ordinal: ordinal}
	permit, err := r.permit(ctx, gate.DeletePod, decided, step, ordinal, g)
	if err != nil {
		return err
	}
	return r.e.sts.DeleteMemberPod(ctx, permit, g.st.Members[ordinal].Pod, decided.Members[ordinal].PodUID)
}

// quorumOnAFreshLook says whether the members other than ordinal keep a quorum on a look taken right before
// the partition is lowered for it, as every pod delete is judged (deleteOnAFreshLook): the plan's observation
// is older by a leader move, a cool-down and the leader check, and a member that fell meanwhile would make the
// restart cost the quorum (the schedule checker's seeds 5782 and 9106 of 10,000: a member crashed while the
// run asked who leads, and the lowering went ahead).
func (r *run) quorumOnAFreshLook(ctx context.Context, ordinal int) error {
	now, err := r.observe(ctx)
	if err != nil {
		return fmt.Errorf("observing right before restarting %s: %w", planner.PodName(r.e.cfg.StatefulSet, ordinal), err)
	}
	now = r.provenInTheSameProcess(ctx, now, ordinal)
	for _, o := range r.passedOrdinals() {
		if m := now.Members[o]; o != ordinal && !m.Healthy && !m.Unseen {
			// Down after it passed, on this very look: one member our writes disrupted is not back, and the
			// next look judges it (lookAtPassed). The others' quorum is no licence for a second (the schedule
			// checker's seed 13206 of 100,000: etcd-4 crashed between the two looks, and etcd-2 was restarted
			// beside it).
			return planner.Blocked("%s, which this run rolled, is down (%s) on a look right before restarting %s", m.Pod, m.Problem, now.Members[ordinal].Pod)
		}
	}
	return planner.CheckQuorum(now, ordinal, r.e.cfg.AcceptWriteOutage)
}

// provenInTheSameProcess is st with a member this run saw pass counted proven only while it still answers from
// the etcd process that passed: a crash loop slower than the stability window answers a look between its
// crashes, from a new process each time (the schedule checker's seed 1197 of ROLLOUT_SCHEDULE_FROM=1000: a
// revert deleted etcd-1's pod while etcd-2, passed and then crash-looping, happened to answer the fresh look).
// One whose process cannot be read is not counted either: quorum is decided on what etcd says, not on hope.
// One that restarted since it passed is not healthy on this look either, whatever it answers now: it did not
// stay up, and a revert must not delete another member's pod while it flaps (the schedule checker's seed 2955
// of 10,000: a revert deleted etcd-3 while etcd-4, rolled by the run and slowly crash-looping, answered from
// its next process). One found down by its own answer when its process is read did not stay up either (the
// schedule checker's seed 49676 of 100,000: the exit's look read etcd-1, rolled and then recreated by someone
// else onto a crash-looping revision, as refusing connections, and the run still reported it rolled).
func (r *run) provenInTheSameProcess(ctx context.Context, st ClusterState, except int) ClusterState {
	st.Members = append([]MemberState(nil), st.Members...)
	for _, ordinal := range r.passedOrdinals() {
		p := r.passed[ordinal]
		if ordinal == except || ordinal >= len(st.Members) || !st.Members[ordinal].Proven || !p.incarnation.Known() {
			continue
		}
		pod := st.Members[ordinal].Pod
		inc, err := r.e.processOf(ctx, pod)
		restarted := err == nil && !inc.Same(p.incarnation)
		down := err != nil && !member.CouldNotLook(err) && !errors.Is(err, member.ErrNoIncarnation) && ctx.Err() == nil
		if err != nil || restarted {
			st.Members[ordinal].Proven = false
		}
		if restarted || down {
			// It did not stay up, and the run's report must not count it rolled (the schedule checker's seed
			// 2195 of ROLLOUT_SCHEDULE_FROM=2000).
			r.downAfterPass[pod] = true
			m := &st.Members[ordinal]
			m.Healthy, m.Reason = false, ProblemDownAfterPassing
			m.Problem = fmt.Sprintf("restarted since it passed (etcd process %s, %s passed)", inc.Name(), p.incarnation.Name())
			if down {
				m.Problem = fmt.Sprintf("down since it passed (%v)", err)
			}
		}
	}
	return st
}
