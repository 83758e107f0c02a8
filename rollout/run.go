package rollout

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/etcd-rollout/pulumi-etcd-rollout/rollout/internal/gate"
	"github.com/etcd-rollout/pulumi-etcd-rollout/rollout/internal/lease"
	"github.com/etcd-rollout/pulumi-etcd-rollout/rollout/internal/planner"
	"github.com/etcd-rollout/pulumi-etcd-rollout/rollout/internal/poll"
	"github.com/etcd-rollout/pulumi-etcd-rollout/rollout/internal/procedure/restart"
	"github.com/etcd-rollout/pulumi-etcd-rollout/rollout/internal/procedure/revert"
	"github.com/etcd-rollout/pulumi-etcd-rollout/rollout/internal/procedure/versionchange"
	"github.com/etcd-rollout/pulumi-etcd-rollout/rollout/internal/trustcheck"
)

// maxStepRetries bounds how often one step is re-planned because live state moved under it (a transfer
// that etcd aborted, a leader that came back to the member about to restart).
const maxStepRetries = 3

// run is the state of one Run.
type run struct {
	e     *Engine
	res   *Result
	lease lease.State
	// touched is set once this run has written the partition, so exits re-lock; a run refused by its
	// preconditions changes nothing.
	touched bool
	// disrupted is set once this run has moved a leader or restarted a member: from then on a blocked
	// cluster is waited out for the health timeout, before it for the ready timeout.
	disrupted bool
	gen       int64
	uid       string
	// startRev is the updateRevision this run rolls to, once known.
	startRev string

	// passed are the members this run restarted or waited for that passed their gates: such a member that is
	// unhealthy again did not stay up on the new revision, and the run stops instead of waiting for it anew.
	passed map[int]*passedMember
	// rolledFrom is the image each member ran before this run restarted it: what the previous template
	// applied by hand would bring back, once the controller made the failed revision current.
	rolledFrom map[int]string
	// versionMove is the first plan's minor-version change, if any: finish waits for the cluster version.
	versionMove *VersionMove
	// startPeers are the peer URLs of etcd's member list as this run first read it: a member list that grows
	// once a member runs the new minor is not this run's doing (checkNoNewMembers).
	startPeers map[string]bool
	// downgrade is set once this run enabled etcd's downgrade API: an exit before any restart cancels it.
	downgrade *downgradeRun
	// requestsBefore is the engine's API request count when the run started.
	requestsBefore int64
	// trustProbes keeps what the run's trust checks found, for its later checks (trustcheck.Memo).
	trustProbes *trustcheck.Memo
	// last is the latest observation: what an exit asks etcd through.
	last ClusterState
	// memberIDs are the etcd member IDs seen behind each ordinal in this run: a member keeps its ID across a
	// restart, so the ID is known while the member does not answer us.
	memberIDs map[int]uint64
	// downAfterPass names members that refused a look after they passed their gates: they are not reported
	// rolled by a run that fails.
	downAfterPass map[string]bool
	// seenDownSincePass names members a leader move's looks found down by their own answer after they passed:
	// looks no gate makes, which decide nothing (marking such a member down there made the run disrupt
	// another beside it, the schedule checker's seed 23815), but a member so seen did not stay up, and is not
	// reported rolled unless it passes again (seed 21468 of 100,000: it was, and crash-looped).
	seenDownSincePass map[string]bool
	// unproven are the passes onMemberFailure stopped counting (members that passed on one look on a revision
	// that then failed): still reported rolled, so the exit checks them against the process that passed.
	unproven map[int]*passedMember
	// plan is the plan of the step being made: what the gate's snapshot rule reads.
	plan Plan
	// planned is set once the plan has been reported.
	planned     bool
	cooldownDue bool
	// finalCheck is set once the members that passed were checked before the run calls itself done.
	finalCheck   bool
	retries      int
	blockedSince time.Time
}

// takeBack stops counting a member the run had counted passed or rolled, in its result and (through a typed
// event) in the status ConfigMap, and says why.
func (r *run) takeBack(ordinal int, format string, args ...any) {
	pod := planner.PodName(r.e.cfg.StatefulSet, ordinal)
	r.res.unreport(pod)
	r.e.announce(Event{Kind: EventMemberTakenBack, Step: Step{Kind: StepWaitMember, Ordinal: ordinal}, Pod: pod}, format, args...)
}

// passedOrdinals are the members this run saw pass, lowest ordinal first: the run looks at them in an order
// that does not change from one run to the next (a map's would), so that which member a message names first,
// and which etcd calls go out in which order, replay alike.
func (r *run) passedOrdinals() []int {
	return slices.Sorted(maps.Keys(r.passed))
}

// exit is every path out of a run, in order: re-lock the partition this run touched (unless another run
// holds the lease now: the partition is that run's), settle a downgrade left half done, say what state the
// cluster is left in, release the lease (kept when the re-lock failed, so that the next run takes it over and
// re-locks, as after a killed run), and record the failure as a Kubernetes Event.
func (r *run) exit(ctx context.Context, err error, stopRenew func()) error {
	e, res := r.e, r.res
	relocked, holder := true, ""
	if r.touched {
		if holder = e.lease.TakenBy(ctx); holder != "" {
			relocked = false
			err = errors.Join(err, fmt.Errorf("%w: not re-locking it: %s holds lease %s now, so the StatefulSet is that run's to lock", ErrPartitionNotLocked, holder, e.lease.ID()))
		} else if rerr := e.relock(ctx); rerr != nil {
			relocked, holder = false, e.lease.NewHolder()
			err = errors.Join(err, rerr)
		} else {
			e.emit(Step{Kind: StepRelock}, "partition re-locked")
		}
	}
	if err != nil && holder == "" {
		if d := r.downgrade; d != nil {
			err = fmt.Errorf("%w; %s", err, versionchange.Settle(ctx, &changingVersion{runSteps{r}}, r.last, d.target, d.restarted))
		}
	}
	if err != nil {
		// A run that wrote nothing does not ask who holds the lease at its exit, but its renewals may have seen
		// the takeover (the schedule checker's seed 40824 of 100,000: a run that only waited counted the new
		// holder's leader move as an election).
		res.leaseTakenBy = cmp.Or(holder, e.lease.NewHolder())
		r.measureTermAtExit(ctx)
	}
	err = r.reword(ctx, err, relocked)
	stopRenew()
	if relocked {
		lctx, lcancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
		if lerr := e.lease.Release(lctx); lerr != nil {
			err = errors.Join(err, lerr)
		}
		lcancel()
	} else if holder == "" {
		err = fmt.Errorf("%w; lease %s is kept, so the next run takes it over after it goes unrenewed and re-locks first", err, e.lease.ID())
	}
	if err != nil && r.uid != "" && holder == "" {
		e.record(ctx, r.uid, corev1.EventTypeWarning, ReasonRolloutFailed, Truncate(err.Error(), 1000))
	}
	res.FinishedAt = time.Now()
	return err
}

// measureTermAtExit reads the raft term once more on the way out of a failed or cancelled run (best effort,
// briefly, on a context of its own), so that its report counts the elections it saw, or says it could not.
func (r *run) measureTermAtExit(ctx context.Context) {
	cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 2*memberCallTimeout)
	st, err := r.e.Observe(cctx)
	if err == nil {
		// A member reported rolled that restarted since it passed did not stay up, even if it answers now
		// from its next process (the schedule checker's seeds 3622 and 8554 of 10,000: a slow crash loop found
		// down during a revert's gate, up again at the exit).
		st = r.provenInTheSameProcess(cctx, r.withProven(st), -1)
		r.restartedSinceAnUnprovenPass(cctx)
	}
	cancel()
	for _, pod := range slices.Sorted(maps.Keys(r.seenDownSincePass)) {
		if ordinal, ok := planner.OrdinalOf(r.e.cfg.StatefulSet, pod); ok && slices.Contains(r.res.MembersRolled, pod) {
			r.takeBack(ordinal, "%s passed its gates, but a look after that found it down by its own answer: not counted rolled", pod)
		}
	}
	if err == nil {
		r.res.TermAfter = maxTerm(st)
		for _, m := range st.Members {
			if r.downAfterPass[m.Pod] {
				m.Healthy, m.Unseen, m.Problem, m.Reason = false, false, "a look after it passed found it down", ProblemDownAfterPassing
			}
			if slices.Contains(r.res.MembersRolled, m.Pod) && ((!m.Healthy && !m.Unseen) || m.Revision != r.startRev) {
				// It was rolled and passed, but by its own answer is not up on the revision as the run ends: not
				// reported rolled. One no look reaches may be healthy, and stays reported.
				r.takeBack(m.Ordinal, "%s passed its gates but is not healthy on %s as the run ends (%s): not counted rolled", m.Pod, r.startRev, m.Problem)
			}
		}
	}
	r.res.countElections()
}

// restartedSinceAnUnprovenPass marks down every member reported rolled whose pass stopped counting
// (onMemberFailure) and that answers from another etcd process than the one that passed: it did not stay up,
// whatever it answers now (the schedule checker's seed 3554 of 10,000: etcd-3, passed on one look, restarted
// in a slow crash loop, and answered the exit's look from its next process).
func (r *run) restartedSinceAnUnprovenPass(ctx context.Context) {
	for _, ordinal := range slices.Sorted(maps.Keys(r.unproven)) {
		p, pod := r.unproven[ordinal], planner.PodName(r.e.cfg.StatefulSet, ordinal)
		if !p.incarnation.Known() || !slices.Contains(r.res.MembersRolled, pod) {
			continue
		}
		if inc, err := r.e.processOf(ctx, pod); err == nil && !inc.Same(p.incarnation) {
			r.downAfterPass[pod] = true
		}
	}
}

// reword tells a person, after a failure with the partition locked, what state the cluster is in and what to
// do next.
func (r *run) reword(ctx context.Context, err error, relocked bool) error {
	e, res := r.e, r.res
	var gate *GateTimeoutError
	var reverted *RevertedError
	switch {
	case err == nil || ctx.Err() != nil || !relocked || !r.touched:
	case errors.As(err, &reverted):
		err = fmt.Errorf("%w; %s is healthy on %s again and the partition is locked, so no other member restarts: fix the template (the pod's events and logs from the failed start say why) and run again", err, reverted.Pod, reverted.To)
	case errors.As(err, &gate):
		err = fmt.Errorf("%w; the partition is locked again, so no other member restarts: look at %s (its events and logs), fix the template or the member, and run again", err, gate.Pod)
	}
	if err != nil && ctx.Err() != nil && relocked {
		// The caller gave up (Ctrl-C, a deadline): say what state it leaves and that a rerun resumes.
		err = fmt.Errorf("rollout of %s/%s stopped by the caller after %s rolled %v; the partition is locked, run it again to roll the members that are left: %w",
			e.cfg.Namespace, e.cfg.StatefulSet, planner.Plural(len(res.MembersRolled), "member", "members"), res.MembersRolled, err)
	}
	return err
}

func (r *run) execute(ctx context.Context) error {
	st, err := r.begin(ctx)
	if err != nil {
		return err
	}
	r.res.TermBefore = maxTerm(st)
	for first := true; ; first = false {
		if !first {
			if st, err = r.observe(ctx); err != nil {
				return err
			}
			if err := r.checkSameTemplate(st); err != nil {
				return err
			}
		}
		st = r.withProven(st)
		r.last = st
		if err := r.checkNoNewMembers(st); err != nil {
			return err
		}
		again, err := r.refusedAfterPassing(ctx, st)
		if err != nil {
			return r.onMemberFailure(ctx, err)
		}
		if again {
			continue
		}
		plan, ready, err := r.planOrHold(ctx, st)
		if err != nil {
			return err
		}
		if !ready {
			continue
		}
		r.plan = plan
		if len(plan.Roll) == 0 && len(plan.Wait) == 0 {
			if !r.finalCheck && len(r.passed) > 0 {
				// Done is a claim like any disruption: the members that passed must still run the etcd
				// process that passed, the last one included, which no cool-down watched.
				r.finalCheck = true
				again, err := r.checkPassed(ctx)
				if err != nil {
					return r.onMemberFailure(ctx, err)
				}
				if again {
					continue
				}
			}
			if len(plan.Steps) > 0 && plan.Steps[0].Kind == StepLock {
				if err := r.lock(ctx, st.Replicas); err != nil {
					return err
				}
			}
			break
		}
		again, err = r.coolDown(ctx)
		if err != nil {
			return r.onMemberFailure(ctx, err)
		}
		if again {
			continue // the cluster may have moved while we waited: look again
		}
		if err := r.snapshotFirst(ctx, st, plan); err != nil {
			return err
		}
		if err := r.step(ctx, st, plan.Steps[0]); err != nil {
			if k := plan.Steps[0].Kind; k == StepRecreate || k == StepEnableDowngrade {
				return err // neither is a failure of a member on the new revision
			}
			return r.onMemberFailure(ctx, err)
		}
	}
	return r.finish(ctx)
}

// begin takes the first look: it refuses what a rollout cannot work with (OnDelete, a partition lowered
// by a stranger) and re-locks a partition that a dead predecessor left lowered before anything else.
func (r *run) begin(ctx context.Context) (ClusterState, error) {
	e := r.e
	st, err := r.observe(ctx)
	if err != nil {
		return st, err
	}
	r.uid = st.StatefulSetUID
	if st.Partition < 0 {
		return st, fmt.Errorf("%w: StatefulSet %s uses the OnDelete update strategy; the rollout needs RollingUpdate with partition = replicas", ErrBlocked, e.cfg.StatefulSet)
	}
	if st.Partition < st.Replicas && r.lease.TookOverFrom == "" {
		return st, fmt.Errorf("%w: partition is %d with %d replicas and no rollout holds lease %s: something else lowered it; re-lock it (`etcd-rollout unlock`) if that was intended to stop",
			ErrInterference, st.Partition, st.Replicas, e.lease.ID())
	}
	if r.lease.TookOverFrom != "" {
		e.announce(Event{Kind: EventTookOver, PreviousHolder: r.lease.TookOverFrom}, "took over the stale lease of %s", r.lease.TookOverFrom)
	}
	if st.Partition < st.Replicas {
		// A run that died (SIGKILL, a lost node) left the partition lowered: until it is locked again the
		// StatefulSet controller may restart members this run has not checked, even the leader. Lock
		// first, then look again and plan.
		e.emit(Step{Kind: StepLock, Ordinal: st.Replicas}, "partition left at %d by %s; re-locking it before anything else", st.Partition, r.lease.TookOverFrom)
		if err := r.lock(ctx, st.Replicas); err != nil {
			return st, fmt.Errorf("re-locking the partition that %s left at %d: %w", r.lease.TookOverFrom, st.Partition, err)
		}
		if st, err = r.observe(ctx); err != nil {
			return st, err
		}
	}
	r.gen = st.Generation
	r.startRev = st.UpdateRevision
	r.res.UpdateRevision = st.UpdateRevision
	return st, nil
}

// checkSameTemplate stops the run when someone else changed the StatefulSet's spec since this run's last
// own write. An unknown updateRevision (the controller has not observed the latest generation yet) is not
// a change: the planner holds until it is known.
func (r *run) checkSameTemplate(st ClusterState) error {
	if r.startRev == "" {
		r.startRev = st.UpdateRevision
		r.res.UpdateRevision = st.UpdateRevision
	}
	if st.Generation != r.gen || (st.UpdateRevision != "" && st.UpdateRevision != r.startRev) {
		return fmt.Errorf("%w during the rollout: generation %d (expected %d), updateRevision %q (started with %q), partition %d; stopping rather than racing it: find who changed it (the StatefulSet's managedFields name the writer), then run again to roll to its current template",
			ErrInterference, st.Generation, r.gen, st.UpdateRevision, r.startRev, st.Partition)
	}
	return nil
}

// planOrHold plans from st. A blocked state (no leader yet, a member down that is not being rolled, a pod
// the controller has not created yet) disrupts nothing and is waited out: before this run's first
// disruption for up to the ready timeout, as the old Job waited for an elected leader (a new cluster whose
// members start late, a member still loading its database); after it for up to the health timeout. ready
// is false after such a wait: the caller looks again.
func (r *run) planOrHold(ctx context.Context, st ClusterState) (plan Plan, ready bool, err error) {
	e := r.e
	plan, err = PlanRollout(st, e.cfg.LeaderPolicy)
	plan.Cooldown = e.cfg.Cooldown
	e.fillSnapshot(&plan)
	// The gate's Start sequence: a hold is waited out; a missing consent is not, it is refused first.
	err = r.startPermit(ctx, st, &plan, err)
	if !errors.Is(err, ErrBlocked) || planner.WaitingCannotFix(err) {
		if err != nil {
			return plan, false, fmt.Errorf("rolling %s/%s: %w", e.cfg.Namespace, e.cfg.StatefulSet, err)
		}
		if !r.blockedSince.IsZero() {
			e.announce(Event{Kind: EventUnblocked}, "unblocked after %s", time.Since(r.blockedSince).Round(100*time.Millisecond))
			r.blockedSince = time.Time{}
		}
		if r.res.TermBefore == 0 {
			r.res.TermBefore = maxTerm(st) // a new cluster has no term until its first leader
		}
		if !r.planned {
			r.planned = true
			r.versionMove = plan.VersionMove
			e.announce(Event{Kind: EventPlanned, Plan: &plan}, "plan: %s", plan)
		}
		return plan, true, nil
	}
	if hopeless := unfixableByWaiting(st); hopeless != nil {
		return plan, false, fmt.Errorf("rolling %s/%s: %w (not waiting: %w)", e.cfg.Namespace, e.cfg.StatefulSet, err, hopeless)
	}
	limit, what := e.cfg.HealthTimeout, "health timeout"
	if !r.disrupted {
		limit, what = e.cfg.ReadyTimeout, "ready timeout"
	}
	if r.blockedSince.IsZero() {
		r.blockedSince = time.Now()
		var blocked *BlockedError
		errors.As(err, &blocked)
		e.announce(Event{Kind: EventHolding, Blocked: blocked}, "holding: %v (waiting up to the %s, %s)", err, what, limit)
	}
	if time.Since(r.blockedSince) > limit {
		return plan, false, fmt.Errorf("rolling %s/%s: still blocked after %s (the %s): %w", e.cfg.Namespace, e.cfg.StatefulSet, limit, what, err)
	}
	if serr := poll.Sleep(ctx, e.pollEvery); serr != nil {
		return plan, false, fmt.Errorf("while holding (%v): %w", err, serr)
	}
	return plan, false, nil
}

// observe is Engine.Observe as this run sees it: the members it saw pass marked Proven, and the member IDs
// remembered (a member keeps its ID across a restart, so the ID is known while it does not answer us).
func (r *run) observe(ctx context.Context) (ClusterState, error) {
	st, err := r.e.Observe(ctx)
	if err != nil {
		return st, err
	}
	if r.memberIDs == nil {
		r.memberIDs, r.downAfterPass, r.seenDownSincePass = map[int]uint64{}, map[string]bool{}, map[string]bool{}
	}
	st = r.withoutStaleViews(ctx, st)
	r.withoutReplaced(ctx, st)
	for _, m := range st.Members {
		if m.Reachable && m.MemberID != 0 {
			r.memberIDs[m.Ordinal] = m.MemberID
		}
		if r.sawPass(m.Ordinal) && !m.Reachable && !m.Unseen {
			r.downAfterPass[m.Pod] = true
		}
	}
	return r.withProven(st), nil
}

// sawPass says this run saw member ordinal pass, whether that pass still counts or onMemberFailure took it
// back (unproven): either way it is reported rolled until a look finds it down (the schedule checker's seed
// 5111 of 10,000: etcd-0, passed on one look, was found down by the revert's look after its pass stopped
// counting, and was reported rolled).
func (r *run) sawPass(ordinal int) bool {
	_, passed := r.passed[ordinal]
	_, unproven := r.unproven[ordinal]
	return passed || unproven
}

// sawDown hears of a member a gate's look found down by its own answer: one this run saw pass did not stay up,
// and is not reported rolled unless a later look shows it back in the same process (measureTermAtExit).
// sawDownOnTheWay hears of a member a leader move's looks found down by its own answer: one that passed is not
// reported rolled unless it passes again (seenDownSincePass).
func (r *run) sawDownOnTheWay(pod string) {
	if ordinal, ok := planner.OrdinalOf(r.e.cfg.StatefulSet, pod); ok && r.sawPass(ordinal) && r.seenDownSincePass != nil {
		r.seenDownSincePass[pod] = true
	}
}

func (r *run) sawDown(pod string) {
	if ordinal, ok := planner.OrdinalOf(r.e.cfg.StatefulSet, pod); ok {
		if r.sawPass(ordinal) && r.downAfterPass != nil {
			r.downAfterPass[pod] = true
		}
	}
}

// refusedAfterPassing is the failure of a member that passed its gates in this run and that st saw refuse a
// look by its own answer (not one that never reached it): it did not stay up, whatever the plan would do next
// (a blocked plan holds and would not look at it again). One whose pod someone else replaced since the look
// that took st is forgotten instead (forgetReplaced), and again says to look again.
func (r *run) refusedAfterPassing(ctx context.Context, st ClusterState) (again bool, err error) {
	for _, m := range st.Members {
		p, ok := r.passed[m.Ordinal]
		if !ok || m.Reachable || m.Unseen {
			continue
		}
		if forgot, err := r.replacedOrEnded(ctx, m.Ordinal, p); forgot || err != nil {
			return forgot, err
		}
		return false, p.failed(m.Pod, m.Problem, false)
	}
	return false, nil
}

// withoutStaleViews is st with every member that passed, but that st shows on another pod than the one that
// passed while the API server, asked directly, still has the pod that passed alive, marked Unseen: the watch
// cache served an older object (after an API server restart, its relist brought back the pod the member
// replaced, terminating: TestAPIServerRestartMidRollout failed a member that had just passed so). Such a look
// says nothing of the member, which is then held for as one no look reaches, wherever the run looks next.
func (r *run) withoutStaleViews(ctx context.Context, st ClusterState) ClusterState {
	st.Members = append([]MemberState(nil), st.Members...)
	for i, m := range st.Members {
		p, ok := r.passed[m.Ordinal]
		if !ok || m.Reachable || m.Unseen || !m.PodExists || p.witness.UID == "" || m.PodUID == p.witness.UID {
			continue
		}
		if r.e.sts.PodAlive(ctx, m.Pod, p.witness.UID) {
			st.Members[i].Unseen, st.Members[i].Reason = true, ProblemUnreached
			st.Members[i].Problem = fmt.Sprintf("the cache shows %s on pod %s (%s) while the API server still has the pod that passed alive: a stale view",
				m.Pod, m.PodUID, m.Problem)
		}
	}
	return st
}

// withProven is st with every member this run saw pass its gates marked Proven, for the planner: only those
// need no proof on the update revision (needsProof). A member found down after it passed is proven no more,
// even when a later look finds it up: a fast crash loop answers between its crashes, and counted for quorum on
// such a look, it let a revert delete another member's pod (the schedule checker's seed 1055 of
// ROLLOUT_SCHEDULE_FROM=1000). It is proven again only by passing its gates again (newPassed).
func (r *run) withProven(st ClusterState) ClusterState {
	st.Members = append([]MemberState(nil), st.Members...)
	for i := range st.Members {
		_, passed := r.passed[i]
		st.Members[i].Proven = passed && !r.downAfterPass[st.Members[i].Pod]
	}
	return st
}

// unfixableByWaiting is the first member whose problem no amount of holding cures
// (ProblemReason.WaitingCannotFix). A blocked cluster with one of those is bad input, reported at once rather
// than after the ready timeout.
func unfixableByWaiting(st ClusterState) *MemberProblemError {
	for _, m := range st.Members {
		if m.Reason.WaitingCannotFix() {
			return &MemberProblemError{Pod: m.Pod, Reason: m.Reason, Problem: m.Problem}
		}
	}
	return nil
}

// step runs the plan's first step. Steps that found live state moved under them (an aborted transfer, a
// leader back on the member about to restart) return nil to be re-planned, up to maxStepRetries times.
func (r *run) step(ctx context.Context, st ClusterState, step Step) error {
	e := r.e
	switch step.Kind {
	case StepLock:
		return r.lock(ctx, st.Replicas)
	case StepTransferLeader:
		from, to := st.Members[step.From].Pod, st.Members[step.To].Pod
		e.announce(Event{Kind: EventLeaderMoving, Step: step, From: from, To: to}, "moving leader %s → %s", from, to)
		r.disrupted = true
		permit, err := r.permit(ctx, gate.MoveLeader, st, step, step.From, nil)
		if err != nil {
			return fmt.Errorf("not moving the leader %s → %s: %w", from, to, err)
		}
		if err := r.moveLeader(ctx, permit, st, step); err != nil {
			return r.lookAgain(ctx, step, err)
		}
		e.announce(Event{Kind: EventLeaderMoved, Step: step, From: from, To: to}, "leader moved %s → %s", from, to)
		e.record(ctx, r.uid, corev1.EventTypeNormal, ReasonLeaderTransferred, fmt.Sprintf("Moved the etcd leader from %s to %s before restarting a member", from, to))
	case StepReplace:
		if err := r.replaceMember(ctx, st, step); err != nil {
			return err
		}
	case StepLowerPartition:
		cleared, err := restart.Restart(ctx, &restarting{runSteps{r}}, st, step)
		if err != nil {
			if cleared && errors.Is(err, ErrReplacedMidGate) {
				return r.lookAgain(ctx, step, err)
			}
			return err
		}
		if cleared {
			r.cooldownDue, r.retries = true, 0
		}
	case StepRecreate:
		return revert.Recreate(ctx, &reverting{runSteps{r}}, st, step.Ordinal)
	case StepEnableDowngrade:
		return versionchange.Enable(ctx, &changingVersion{runSteps{r}}, st, step)
	case StepWaitMember:
		pod := st.Members[step.Ordinal].Pod
		if p, ok := r.passed[step.Ordinal]; ok && !st.Members[step.Ordinal].Reachable {
			return r.holdUnseen(ctx, step.Ordinal, p, st.Members[step.Ordinal])
		}
		if why := e.sts.PodOffRevision(ctx, pod, st.UpdateRevision); why != "" {
			// The plan's look came from a watch that can lag: a pod someone else put back on the old revision
			// would make this gate wait for a revision that never comes, and blame the revision (the schedule
			// checker's seed 13629 of 100,000, with a lagging watch).
			return r.lookAgain(ctx, step, fmt.Errorf("%w: %s: %s, by the API server's word", ErrReplacedMidGate, pod, why))
		}
		e.emit(step, "waiting for %s to pass its gates", pod)
		// A member this run did not restart proves itself with the whole stability window, proven revision or
		// not: an earlier run may have left it there crash-looping.
		want := expectedSpec{Partition: st.Partition, Generation: r.gen, FullWindow: true}
		pass, err := e.waitMember(ctx, st, step.Ordinal, want, time.Now())
		if errors.Is(err, ErrReplacedMidGate) {
			return r.lookAgain(ctx, step, err)
		}
		if err != nil {
			return err
		}
		r.passed[step.Ordinal] = r.newPassed(ctx, pod, pass, false)
		e.announce(Event{Kind: EventMemberPassed, Step: step, Pod: pod}, "%s healthy", pod)
		r.cooldownDue, r.retries = true, 0
	default:
		return fmt.Errorf("internal: plan starts with %s", step.Kind)
	}
	return nil
}

// moveLeader moves the leader as step says, under permit, and counts the move in the result: a transfer that
// happened, or one whose outcome nobody can tell.
func (r *run) moveLeader(ctx context.Context, permit gate.Permit, st ClusterState, step Step) error {
	moved, err := r.e.transferLeader(ctx, permit, st, step)
	if moved {
		r.res.LeaderTransfers++
	}
	if errors.Is(err, errMoveOutcomeUnknown) {
		r.res.movesUnknown++
	}
	return err
}

// lookAgain ends a step that found live state moved under it (a transfer etcd aborted, a pod someone else
// replaced during its gates) without failing the run: the run observes and plans again, up to maxStepRetries
// times in a row.
func (r *run) lookAgain(ctx context.Context, step Step, err error) error {
	if r.retries++; r.retries > maxStepRetries || ctx.Err() != nil {
		return err
	}
	r.e.emit(step, "%v; looking again", err)
	return nil
}

// finish records the outcome once every member passed its gates; every path out of the loop ended with
// this run's own lock write, so there is nothing left to re-lock. After a minor-version change it waits for
// the cluster version and fails when a member's own version is not the template's minor.
func (r *run) finish(ctx context.Context) error {
	e := r.e
	after, err := e.Observe(ctx)
	if err == nil {
		// Done is claimed on this look too: a member that passed and is down on it by its own answer did not
		// stay up (the schedule checker's seed 59083 of 100,000: the last member, passed on one look as its
		// revision began to crash-loop, was down on this look and reported rolled).
		if _, ferr := r.refusedAfterPassing(ctx, after); ferr != nil {
			return r.onMemberFailure(ctx, ferr)
		}
	}
	r.touched = false
	if err == nil {
		r.res.TermAfter = maxTerm(after)
		r.res.ClusterVersion = after.ClusterVersion
	}
	if mv := r.versionMove; mv != nil && err == nil {
		if verr := versionchange.CheckMemberVersions(after, mv.To); verr != nil {
			return verr
		}
		versionchange.EndJob(ctx, &changingVersion{runSteps{r}}, after, *mv)
		r.res.ClusterVersion = e.awaitClusterVersion(ctx, after, mv.To)
	} else if err == nil {
		seen, derr := versionchange.EndLeft(ctx, &changingVersion{runSteps{r}}, after)
		if derr != nil {
			return derr
		}
		if seen != "" {
			r.res.ClusterVersion = seen
		}
	}
	if err == nil && len(after.Replacing) > 0 {
		// Every member votes on the update revision: no replacement is in flight any more.
		if cerr := e.records.Clear(ctx); cerr != nil {
			e.emit(Step{Kind: StepRelock}, "the replacement records stay (the next run clears them): %v", cerr)
		}
	}
	r.res.APIRequests = int(e.requests.Count() - r.requestsBefore)
	r.res.countElections()
	e.announce(Event{Kind: EventDone, Step: Step{Kind: StepRelock}, Summary: r.res.Summary()}, "done: %s", r.res.Summary())
	if len(r.res.MembersRolled) > 0 {
		e.record(ctx, r.uid, corev1.EventTypeNormal, ReasonRolloutDone, r.res.Summary())
	}
	return nil
}

// gateRestarted waits for the gates of a member this run restarted (or replaced) since start, and reports it
// rolled once it passes.
func (r *run) gateRestarted(ctx context.Context, st ClusterState, ordinal int, want expectedSpec, oneLook bool, start time.Time) error {
	e, pod := r.e, st.Members[ordinal].Pod
	pass, err := e.waitMember(ctx, st, ordinal, want, start)
	if err != nil {
		return fmt.Errorf("rolling %s: %w", pod, err)
	}
	r.reportRolled(ctx, st, ordinal, pass, oneLook, start)
	return nil
}

// reportRolled reports a member this run restarted (or replaced) since start rolled, once it passed its gates.
func (r *run) reportRolled(ctx context.Context, st ClusterState, ordinal int, pass passage, oneLook bool, start time.Time) {
	e, pod := r.e, st.Members[ordinal].Pod
	down := time.Since(start)
	r.passed[ordinal] = r.newPassed(ctx, pod, pass, oneLook)
	r.res.reportRolled(MemberTiming{Pod: pod, Down: down, Finished: time.Now(), Process: pass.incarnation.Name()})
	e.announce(Event{Kind: EventMemberRolled, Step: Step{Kind: StepWaitMember, Ordinal: ordinal}, Pod: pod, Elapsed: down}, "%s rolled in %s", pod, down.Round(10*time.Millisecond))
	e.record(ctx, r.uid, corev1.EventTypeNormal, ReasonMemberRolled, fmt.Sprintf("Rolled %s to revision %s; etcd healthy after %s", pod, st.UpdateRevision, down.Round(10*time.Millisecond)))
}

// clearToDisrupt asks the gate right before a restart (the partition lowered) or a replacement's remove: the
// member does not lead again, the quorum the plan counted on still answers from the etcd process that passed (a
// member that passed and stops answering or restarted did not stay up: its failure; one no look reaches is held
// for), its peers trust it, the others keep a quorum on a fresh look, and the lease is ours. Not clear (a hold)
// means look again; the permit's lease covers the step that follows at once.
func (r *run) clearToDisrupt(ctx context.Context, st ClusterState, step Step) (gate.Permit, bool, error) {
	kind := gate.Restart
	if step.Kind == StepReplace {
		kind = gate.RemoveMember
	}
	permit, err := r.permit(ctx, kind, st, step, step.Ordinal, nil)
	if err == nil {
		return permit, true, nil
	}
	return gate.Permit{}, false, gate.UnlessHeld(err)
}

// lock sets partition = replicas. It is always safe for the cluster, but not for another run: a run that lost
// its lease to one rolling now would undo that run's lowering, so the lease is confirmed first.
func (r *run) lock(ctx context.Context, replicas int) error {
	if err := r.e.lease.Confirm(ctx); err != nil {
		return fmt.Errorf("not locking the partition: %w", err)
	}
	r.touched = true
	wctx, cancel := r.e.lease.Within(ctx) // a lock landing after a takeover would break the new holder's roll
	defer cancel()
	gen, err := r.e.sts.SetPartition(wctx, replicas)
	if err != nil {
		return err
	}
	r.gen = gen
	return nil
}
