package replacement

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/etcd-rollout/pulumi-etcd-rollout/rollout/internal/gate"
	"github.com/etcd-rollout/pulumi-etcd-rollout/rollout/internal/memberlist"
	"github.com/etcd-rollout/pulumi-etcd-rollout/rollout/internal/planner"
	"github.com/etcd-rollout/pulumi-etcd-rollout/rollout/internal/poll"
	"github.com/etcd-rollout/pulumi-etcd-rollout/rollout/internal/replace"
)

// learnerCatchUp is how far (in applied raft entries) a learner may be behind the leader when it is promoted.
// etcd's own promote check is a 90 % ratio of raft indexes, which passes far behind on a big log
// (../shared/notes/shapes.md §1.2): the engine asks for this first, and retries etcd's ErrLearnerNotReady.
const learnerCatchUp = 100

// errRePlan ends a replacement's pass without failing it: the plan must be made again (the member leads, or
// the others do not keep a quorum on the look before its removal).
var errRePlan = errors.New("the replacement needs a new plan first")

// replacement is one member's replacement in a run: each pass looks afresh, asks replace.Next, does that one
// thing.
type replacement struct {
	eng   Engine
	set   Settings
	step  planner.Step
	pod   string
	start time.Time
	// lastErr is the last membership call that failed without an answer that says where the change stands:
	// the next pass looks again, and a replacement that runs out of time says it.
	lastErr error
}

// Run replaces a member whose data dies with its pod (issue 32): remove it, let its pod go, add its
// peer URL back as a learner, promote it once caught up, each decided by replace.Next on a fresh look at etcd's
// member list, the pod and the record, so that a run killed anywhere is resumed by the next (resumeReplacement).
// Once the new member votes, it goes through the usual gates, with the whole stability window.
func Run(ctx context.Context, eng Engine, st planner.ClusterState, step planner.Step, set Settings) error {
	rp := &replacement{eng: eng, set: set, step: step, pod: st.Members[step.Ordinal].Pod, start: time.Now()}
	eng.Replacing(step, rp.pod, fmt.Sprintf("replacing %s: its data dies with its pod, so it is removed, added back as a learner and promoted, never restarted under its old member ID", rp.pod))
	if err := rp.forgetFinished(ctx, st); err != nil {
		return err
	}
	deadline := rp.start.Add(set.Timeout)
	why, err := poll.Until(ctx, deadline, poll.Every(set.PollEvery), rp.pass)
	switch {
	case errors.Is(err, errRePlan):
		return nil
	case errors.Is(err, poll.ErrWaitedOut):
		if rp.lastErr != nil {
			why += fmt.Sprintf(" (last etcd call: %v)", rp.lastErr)
		}
		return fmt.Errorf("replacing %s: not done within %s (the ready and health timeouts): %s; the partition is locked and nothing else restarts: look at the pod's events and logs, then run again, which resumes the replacement where it stands",
			rp.pod, set.Timeout, why)
	case err != nil:
		return fmt.Errorf("replacing %s: %w", rp.pod, err)
	}
	now, err := eng.Look(ctx)
	if err != nil {
		return err
	}
	if m := now.Members[step.Ordinal]; m.Revision != now.UpdateRevision {
		// Its pod went with the partition locked (the members above it are not at the update revision: a
		// template written since the replacement began): it is back on the revision it had, under its new ID,
		// and rolls in its turn.
		eng.Say(step, "%s votes under its new member ID, back on revision %s; waiting for its gates, then it rolls in its turn", rp.pod, m.Revision)
		if _, err := eng.WaitVoter(ctx, now, step.Ordinal, m.Revision, rp.start); err != nil {
			return fmt.Errorf("replacing %s: %w", rp.pod, err)
		}
		rp.forget(ctx)
		return nil
	}
	eng.Say(step, "%s votes under its new member ID; waiting for its gates", rp.pod)
	report, err := eng.WaitVoter(ctx, now, step.Ordinal, "", rp.start)
	if err != nil {
		return fmt.Errorf("rolling %s: %w", rp.pod, err)
	}
	if again, err := rp.podWentSincePromote(ctx); err != nil || again {
		return err
	}
	report(ctx)
	rp.forget(ctx)
	return nil
}

// podWentSincePromote looks once more after the new voter's gates: a pod recreated since the promote (a drain,
// an eviction, a delete during the gates) came back with an empty data dir under the voter's ID, and etcd's
// health says nothing of that. The record stays, and the next plan replaces the member again.
func (rp *replacement) podWentSincePromote(ctx context.Context) (bool, error) {
	st, err := rp.eng.Look(ctx)
	if err != nil {
		return false, err
	}
	rec, ok := st.Replacing[rp.step.Ordinal]
	if !ok || !st.MembershipKnown {
		return false, nil
	}
	next, err := replace.Next(planner.ReplaceObserved(st, rp.step.Ordinal, rec))
	if err != nil || next.Action != replace.ReplaceAgain {
		return false, err
	}
	rp.eng.Say(rp.step, "%s: not reported rolled", next.Why)
	return true, nil
}

// forget deletes the record of the replacement just finished. Best effort: a record left behind says its
// replacement is done (its learner votes), which the next replacement of the member reads as such
// (forgetFinished), and the end of the roll clears it (the schedule checker's seed 3496 of 10,000: an API
// server outage right after a pass failed the run on this delete).
func (rp *replacement) forget(ctx context.Context) {
	if err := rp.eng.DeleteRecord(ctx, rp.step.Ordinal); err != nil {
		rp.eng.Say(rp.step, "the record of %s's replacement stays for now (%v); it says the replacement is done", rp.pod, err)
	}
}

// forgetFinished deletes the record of a replacement an earlier run finished, onto an earlier revision, but
// did not get to delete (its new member votes and the member is not at the update revision): this replacement
// starts afresh.
func (rp *replacement) forgetFinished(ctx context.Context, st planner.ClusterState) error {
	ordinal := rp.step.Ordinal
	rec, ok := st.Replacing[ordinal]
	if !ok || st.Members[ordinal].Revision == st.UpdateRevision {
		return nil
	}
	if next, err := replace.Next(planner.ReplaceObserved(st, ordinal, rec)); err != nil || next.Action != replace.Verify {
		return nil
	}
	return rp.eng.DeleteRecord(ctx, ordinal)
}

// pass is one look and at most one action: why it is not done yet, or done once the new member votes.
func (rp *replacement) pass(ctx context.Context) (string, bool, error) {
	st, err := rp.eng.Look(ctx)
	if err != nil {
		return "", false, err
	}
	if err := rp.eng.SameTemplate(st); err != nil {
		return "", false, err
	}
	if !st.MembershipKnown {
		// Nobody gave the member list: nothing is known of who is a member, and a member missing from a list
		// nobody gave is not removed (the schedule checker's seed 387 of 10,000: an API server outage left the
		// list empty, the old member read as removed, and its pod was let go under its old ID).
		return "no member answered for etcd's member list", false, nil
	}
	o, err := rp.observed(st)
	if err != nil {
		return "", false, err
	}
	next, err := replace.Next(o)
	if err != nil {
		return "", false, err
	}
	switch next.Action {
	case replace.Verify:
		return next.Why, true, nil
	case replace.MoveLeader:
		rp.eng.Say(rp.step, "%s: planning a leader transfer first", next.Why)
		return next.Why, false, errRePlan
	case replace.Remove, replace.ReplaceAgain:
		if next.Action == replace.ReplaceAgain {
			rp.eng.Say(rp.step, "%s", next.Why)
		}
		err = rp.remove(ctx, st, o, next.ID)
	case replace.LetPodGo:
		err = rp.letPodGo(ctx, st)
	case replace.AddLearner:
		err = rp.addLearner(ctx, st, *o.Record)
	case replace.Promote:
		var behind string
		if behind, err = rp.promote(ctx, st, o, next.ID); behind != "" {
			return behind, false, err
		}
	}
	return next.Why, false, err
}

// observed is what replace.Next reads of the member: its record, or before any, its peer URL from etcd's member
// list (by the member ID it answered with, else by its name).
func (rp *replacement) observed(st planner.ClusterState) (replace.Observed, error) {
	ordinal := rp.step.Ordinal
	if rec, ok := st.Replacing[ordinal]; ok {
		return planner.ReplaceObserved(st, ordinal, rec), nil
	}
	id := rp.eng.MemberID(ordinal)
	seen := st.Members[ordinal]
	if id != 0 {
		seen.MemberID = id // the ID it answered with before, should it not answer now
	}
	if m, ok := planner.ListedAs(st, seen); ok && (id == 0 || m.ID == id) {
		if len(m.PeerURLs) != 1 {
			return replace.Observed{}, fmt.Errorf("member %x has %d peer URLs; a replacement adds back exactly one: replace it by hand", m.ID, len(m.PeerURLs))
		}
		o := planner.ReplaceObserved(st, ordinal, replace.Record{PeerURL: m.PeerURLs[0]})
		o.Record = nil // none yet
		return o, nil
	}
	return replace.Observed{}, fmt.Errorf("%w: etcd's member list names no member for %s (member ID %x), and no rollout recorded removing it: add it back as a learner by hand, or scale the StatefulSet to the members etcd lists, then run again",
		replace.ErrUnexpectedMembership, rp.pod, id)
}

// remove removes the old member, after the checks of every disruption and once its record is written.
func (rp *replacement) remove(ctx context.Context, st planner.ClusterState, o replace.Observed, id uint64) error {
	eng, ordinal := rp.eng, rp.step.Ordinal
	if err := eng.ConfirmLease(ctx); err != nil { // the record is a write of this run's
		return fmt.Errorf("not removing member %x: %w", id, err)
	}
	rec := o.AgainRecord(id) // the first remove of the member, or of a promoted one whose pod went since
	if o.Record != nil && o.Record.OldID == id {
		rec = *o.Record
	}
	if err := eng.SaveRecord(ctx, ordinal, rec); err != nil {
		return err
	}
	// The gate's checks of a remove (another member a rollout rolled being down holds it too), on looks taken
	// after the record was written, right before each try of the remove: a try etcd refused (not ready)
	// changed nothing, and the next one is a disruption like the first (the schedule checker's seeds 37476 and
	// 45914 of the long mode: a retry went out without them while a member that passed crash-looped). A record
	// whose remove never follows says the old member is still listed: the next pass, or run, removes it after
	// the same checks.
	permit, clear, err := eng.ClearToDisrupt(ctx, st, rp.step)
	if err != nil {
		return err
	}
	if !clear {
		return errRePlan
	}
	eng.Disrupting()
	err = rp.call(ctx, permit, st, func(ctx context.Context, via string) error { return eng.Etcd().MemberRemove(ctx, via, id) })
	if err == nil {
		eng.Etcd().Forget(rp.pod)
		eng.Say(rp.step, "removed member %x (%s) from etcd", id, rp.pod)
	}
	return settled(ctx, err)
}

// letPodGo deletes the pod that held the removed member's data: by lowering the partition when it is the next
// ordinal to roll (the controller recreates it at the update revision), else by a delete with the partition
// locked (it comes back on the current revision, a replacement all the same).
func (rp *replacement) letPodGo(ctx context.Context, st planner.ClusterState) error {
	eng, ordinal := rp.eng, rp.step.Ordinal
	// The removed member's data may be the last copy if the others lose their quorum: it goes only while they
	// keep one, on a look right before (the schedule checker's seed 751 of 2,000 with members whose data dies
	// with their pod: the partition was lowered for a removed member while another had crashed), and while
	// every member this run saw pass still runs the process that passed: one that did not stay up is that
	// member's failure, and ends the run with this replacement left for the next (seed 2143 of 10,000: the
	// partition was lowered between two crashes of a member that passed on a crash-looping revision). The
	// gate's ReleaseData sequence judges all of it.
	lowering := !(st.Members[ordinal].Revision == st.UpdateRevision || !planner.AboveAtUpdateRevision(st, ordinal) || st.Partition <= ordinal)
	permit, err := eng.PermitRelease(ctx, st, rp.step, lowering)
	if err != nil {
		return gate.UnlessHeld(err)
	}
	eng.Disrupting()
	if !lowering {
		eng.Say(rp.step, "deleting %s's pod, which holds the removed member's data", rp.pod)
		return eng.DeleteReleased(ctx, st, ordinal)
	}
	if err := eng.LowerPartition(ctx, permit, ordinal); err != nil {
		return err
	}
	eng.PartitionLowered(ordinal, rp.pod, fmt.Sprintf("partition lowered to %d; waiting for the controller to recreate %s, with an empty data dir, at %s", ordinal, rp.pod, st.UpdateRevision))
	if err := eng.WaitPodRecreated(ctx, st, ordinal, rp.start); err != nil {
		return err
	}
	if err := eng.Lock(ctx, st.Replicas); err != nil {
		return err
	}
	eng.Recreated(ordinal, rp.pod, fmt.Sprintf("%s recreated at %s, partition locked again; adding it back as a learner", rp.pod, st.UpdateRevision))
	return nil
}

// addLearner adds the member's peer URL back as a learner and records the ID etcd gave it.
func (rp *replacement) addLearner(ctx context.Context, st planner.ClusterState, rec replace.Record) error {
	eng, ordinal := rp.eng, rp.step.Ordinal
	permit, err := eng.Permit(ctx, gate.ChangeMembership, st, rp.step)
	if err != nil {
		return fmt.Errorf("not adding a learner for %s: %w", rp.pod, err)
	}
	var added memberlist.Member
	err = rp.call(ctx, permit, st, func(ctx context.Context, via string) (err error) {
		added, err = eng.Etcd().MemberAddAsLearner(ctx, via, rec.PeerURL)
		return err
	})
	if err != nil {
		return settled(ctx, err)
	}
	rec.LearnerID = added.ID
	eng.SetMemberID(ordinal, added.ID)
	eng.Say(rp.step, "added %s back as learner %x; waiting for its new pod's etcd to start it", rp.pod, added.ID)
	return eng.SaveRecord(ctx, ordinal, rec)
}

// promote makes the learner a voter once its applied index is within learnerCatchUp of the leader's; until
// then it says how far behind the learner is, which is what a replacement that runs out of time reports.
//
// The pod whose etcd started the learner is recorded before the promote: the voter's data lives and dies with
// it, and a voter found later on another pod is replaced again (replace.ReplaceAgain), never verified.
func (rp *replacement) promote(ctx context.Context, st planner.ClusterState, o replace.Observed, id uint64) (string, error) {
	eng, m := rp.eng, st.Members[rp.step.Ordinal]
	leader := planner.LeaderOf(st)
	switch {
	case !m.Reachable || leader == nil:
		return "", nil // not seen: look again
	case m.AppliedIndex+learnerCatchUp < leader.AppliedIndex:
		return fmt.Sprintf("learner %x (%s) has applied up to index %d, %d entries behind the leader's %d; it is promoted within %d",
			id, rp.pod, m.AppliedIndex, leader.AppliedIndex-m.AppliedIndex, leader.AppliedIndex, learnerCatchUp), nil
	}
	permit, err := eng.Permit(ctx, gate.ChangeMembership, st, rp.step)
	if err != nil {
		return "", fmt.Errorf("not promoting learner %x: %w", id, err)
	}
	if rec := *o.Record; rec.LearnerPodUID != m.PodUID {
		rec.LearnerID, rec.LearnerPodUID = id, m.PodUID
		if err := eng.SaveRecord(ctx, rp.step.Ordinal, rec); err != nil {
			return "", fmt.Errorf("not promoting learner %x before its pod is recorded: %w", id, err)
		}
	}
	err = rp.call(ctx, permit, st, func(ctx context.Context, via string) error { return eng.Etcd().MemberPromote(ctx, via, id) })
	if err == nil {
		eng.Say(rp.step, "promoted learner %x (%s) to a voter", id, rp.pod)
	}
	return "", settled(ctx, err)
}

// call sends a membership change through a healthy member other than the one replaced (the leader first),
// within the lease of the gate's permit for it.
func (rp *replacement) call(ctx context.Context, permit gate.Permit, st planner.ClusterState, do func(ctx context.Context, via string) error) error {
	via := ""
	if l := planner.LeaderOf(st); l != nil && l.Ordinal != rp.step.Ordinal && l.Healthy {
		via = l.Pod
	}
	for _, m := range st.Members {
		if via == "" && m.Ordinal != rp.step.Ordinal && m.Healthy {
			via = m.Pod
		}
	}
	if via == "" {
		return planner.Blocked("no healthy member other than %s to change etcd's membership through (%s)", rp.pod, planner.DescribeMembers(st))
	}
	wctx, cancel := permit.Within(ctx)
	defer cancel()
	cctx, ccancel := context.WithTimeout(wctx, rp.set.CallTimeout)
	defer ccancel()
	err := do(cctx, via)
	if err != nil {
		rp.lastErr = err
	}
	return err
}

// settled is nil for a membership call that failed in a way the next look settles, which is every way but the
// caller's own end: an answer of etcd's that says the change landed already or cannot land yet
// (member.ErrMemberNotFound, ErrPeerURLExists, ErrNotLearner, ErrLearnerNotReady, ErrClusterNotReadyForChange,
// ErrTooManyLearners), one that never came (the lease's deadline, a broken port-forward: it may have landed),
// or a call that did not reach etcd (the member it went through is down). The next pass reads the member list
// again, confirms the lease again before any write, and goes through another member; the replacement's
// deadline bounds it, and its error names the last call's failure.
func settled(ctx context.Context, err error) error {
	if err != nil && ctx.Err() != nil {
		return ctx.Err()
	}
	return nil
}
