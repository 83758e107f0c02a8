// Package revert is the procedure that brings a member back on the StatefulSet's current revision by deleting
// its pod with the partition locked, so the controller recreates it there: the revert of a member that failed
// on the new revision, and the revival of one down on a revision it will not start from (a plan's
// StepRecreate).
//
// It never touches another member. The gate decides whether the pod may go, and whether the leader must move
// off it first (gate.Revert, gate.Recreate, and gate.DeletePod on a look right before the delete); the engine
// that runs it looks, writes and waits.
package revert

import (
	"context"
	"fmt"
	"time"

	"github.com/etcd-rollout/pulumi-etcd-rollout/rollout/internal/gate"
	"github.com/etcd-rollout/pulumi-etcd-rollout/rollout/internal/planner"
)

// Engine is what a revert asks of the run that drives it. The run implements it (rollout/run_procedures.go).
type Engine interface {
	// Look observes the cluster afresh.
	Look(ctx context.Context) (planner.ClusterState, error)
	// Lock sets the partition back to replicas: a revert deletes a pod only with the partition locked.
	Lock(ctx context.Context, replicas int) error
	// PermitRevert asks the gate's Revert sequence whether member ordinal may go back to revision to, and
	// where the leader must move first (-1: nowhere).
	PermitRevert(ctx context.Context, st planner.ClusterState, ordinal int, to string) (moveLeaderTo int, err error)
	// Permit asks the gate for a step of kind (gate.MoveLeader, gate.Recreate).
	Permit(ctx context.Context, kind gate.Kind, st planner.ClusterState, step planner.Step) (gate.Permit, error)
	// MoveLeader moves the leader as step says, under permit, and counts the transfer.
	MoveLeader(ctx context.Context, permit gate.Permit, st planner.ClusterState, step planner.Step) error
	// Disrupting notes that the run is about to disrupt a member.
	Disrupting()
	// Forget drops the etcd client of pod, which is about to go.
	Forget(pod string)
	// DeleteOnAFreshLook deletes member ordinal's pod once the gate's DeletePod sequence passes on a look
	// taken right before; a watchBefore that is not empty says what is about to happen ("reverting etcd-1"),
	// and the gate first watches the other members on the failed revision stay up.
	DeleteOnAFreshLook(ctx context.Context, st planner.ClusterState, ordinal int, watchBefore string) error
	// WaitMember waits for member ordinal's gates with its pod at podRevision.
	WaitMember(ctx context.Context, st planner.ClusterState, ordinal int, podRevision string, since time.Time) error
	// OneMemberBack accounts for the elections a one-member etcd's only member holds when it comes back.
	OneMemberBack(ctx context.Context, st planner.ClusterState, pod string, passed bool)
	// CooldownDue asks for the cool-down before the next disruption.
	CooldownDue()
	// Say is a line of progress.
	Say(step planner.Step, format string, args ...any)
}

// Revert brings member ordinal, which failed on the new revision, back on the StatefulSet's current revision:
// with the partition locked at replicas, a deleted pod is recreated at currentRevision (pods below the
// partition always are). It refuses what etcd would refuse: a member going back to an older minor version once
// the cluster version has moved past it (the gate's Revert sequence). It returns the revision the member is
// back on.
func Revert(ctx context.Context, eng Engine, ordinal int) (string, error) {
	st, err := eng.Look(ctx)
	if err != nil {
		return "", fmt.Errorf("observing before the revert: %w", err)
	}
	if st.Partition < st.Replicas {
		if err := eng.Lock(ctx, st.Replicas); err != nil {
			return "", fmt.Errorf("locking the partition before the revert: %w", err)
		}
		if st, err = eng.Look(ctx); err != nil {
			return "", fmt.Errorf("observing before the revert: %w", err)
		}
	}
	m, to := st.Members[ordinal], st.CurrentRevision
	// The gate's Revert sequence: no other member a rollout restarted is down, there is a revision to go back
	// to that etcd lets the member rejoin on, its peers trust the material it comes back with, and the others
	// keep a quorum without it (and where the leader goes first).
	moveTo, err := eng.PermitRevert(ctx, st, ordinal, to)
	if err != nil {
		return "", err
	}
	if m.PodExists && m.Revision != to {
		if moveTo >= 0 {
			step := planner.Step{Kind: planner.StepTransferLeader, From: ordinal, To: moveTo}
			permit, err := eng.Permit(ctx, gate.MoveLeader, st, step)
			if err != nil {
				return "", fmt.Errorf("not moving the leader off %s before reverting it: %w", m.Pod, err)
			}
			if err := eng.MoveLeader(ctx, permit, st, step); err != nil {
				return "", fmt.Errorf("moving the leader off %s before reverting it: %w", m.Pod, err)
			}
		}
		eng.Say(planner.Step{Kind: planner.StepRecreate, Ordinal: ordinal}, "reverting %s: deleting its pod (revision %s) with the partition locked; the controller recreates it at %s", m.Pod, m.Revision, to)
		eng.Forget(m.Pod)
		if err := eng.DeleteOnAFreshLook(ctx, st, ordinal, "reverting "+m.Pod); err != nil {
			return "", fmt.Errorf("not reverting %s: %w", m.Pod, err)
		}
	}
	err = eng.WaitMember(ctx, st, ordinal, to, time.Now())
	if st.Replicas == 1 {
		eng.OneMemberBack(ctx, st, m.Pod, err == nil)
	}
	if err != nil {
		return "", fmt.Errorf("waiting for %s to pass its gates again at %s: %w", m.Pod, to, err)
	}
	return to, nil
}

// Recreate is the StepRecreate of a plan: a member down on an older revision blocks the quorum the next roll
// needs, so it is brought back at the current revision first. It is out already; deleting its pod costs
// nothing.
func Recreate(ctx context.Context, eng Engine, st planner.ClusterState, ordinal int) error {
	m, step := st.Members[ordinal], planner.Step{Kind: planner.StepRecreate, Ordinal: ordinal}
	if st.Partition < st.Replicas || st.CurrentRevision == "" {
		return fmt.Errorf("internal: bringing back %s needs the partition locked (at %d) and a current revision (%q)", m.Pod, st.Partition, st.CurrentRevision)
	}
	if _, err := eng.Permit(ctx, gate.Recreate, st, step); err != nil {
		return fmt.Errorf("not bringing back %s at %s: %w", m.Pod, st.CurrentRevision, err)
	}
	eng.Disrupting()
	eng.Say(step, "%s is down on revision %s: deleting its pod with the partition locked, so it comes back at %s before the roll", m.Pod, m.Revision, st.CurrentRevision)
	eng.Forget(m.Pod)
	// One member disrupted at a time, as for a revert: not while another member on a revision a rollout
	// restarted it onto is down too (the schedule checker's seed 42335 of the long mode: etcd-1 was brought back
	// while etcd-4, rolled by the run before, had crashed). The delete's fresh look judges it.
	if err := eng.DeleteOnAFreshLook(ctx, st, ordinal, ""); err != nil {
		return fmt.Errorf("bringing back %s at %s: %w", m.Pod, st.CurrentRevision, err)
	}
	if err := eng.WaitMember(ctx, st, ordinal, st.CurrentRevision, time.Now()); err != nil {
		return fmt.Errorf("bringing back %s at %s: %w", m.Pod, st.CurrentRevision, err)
	}
	eng.Say(step, "%s is back and healthy at %s", m.Pod, st.CurrentRevision)
	eng.CooldownDue()
	return nil
}
