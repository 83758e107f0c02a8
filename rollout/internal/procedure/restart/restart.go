// Package restart is the procedure that rolls a member whose data outlives its pod: the StatefulSet's
// partition is lowered to its ordinal, the controller recreates its pod at the update revision, the partition
// is locked again at once, and the member must pass its gates before anything else is disrupted.
//
// It asks the gate's Restart sequence right before the partition is lowered (the member does not lead, the
// others keep a quorum on a fresh look, its peers trust what it comes back with, the lease is the run's) and
// lowers it under the permit it got. The engine that runs it looks, writes and waits.
package restart

import (
	"context"
	"fmt"
	"time"

	"github.com/etcd-rollout/pulumi-etcd-rollout/rollout/internal/gate"
	"github.com/etcd-rollout/pulumi-etcd-rollout/rollout/internal/planner"
)

// Engine is what a restart asks of the run that drives it. The run implements it (rollout/run_procedures.go).
type Engine interface {
	// ClearToDisrupt asks the gate's Restart sequence for the step's member: a permit, or clear false when the
	// plan must be made again (a hold).
	ClearToDisrupt(ctx context.Context, st planner.ClusterState, step planner.Step) (permit gate.Permit, clear bool, err error)
	// MeterOutage starts measuring the write outage of a one-member etcd's restart; nil for any other member.
	MeterOutage(ctx context.Context, st planner.ClusterState, ordinal int) (Outage, error)
	// Disrupting notes that the run restarts member ordinal now, from the image it runs.
	Disrupting(st planner.ClusterState, ordinal int)
	// Forget drops the etcd client of pod, which is about to go.
	Forget(pod string)
	// LowerPartition lowers the partition to ordinal under permit, conditional on the generation the run
	// observed; WaitPodRecreated waits for the controller to recreate that pod at the update revision; Lock
	// sets the partition back to replicas.
	LowerPartition(ctx context.Context, permit gate.Permit, ordinal int) error
	WaitPodRecreated(ctx context.Context, st planner.ClusterState, ordinal int, since time.Time) error
	Lock(ctx context.Context, replicas int) error
	// DeleteOnAFreshLook deletes member ordinal's pod once the gate's DeletePod sequence passes on a look taken
	// right before: a member already down that the controller would not replace (OrderedReady).
	DeleteOnAFreshLook(ctx context.Context, st planner.ClusterState, ordinal int) error
	// WaitRestarted waits for the gates of the member restarted since since and reports it rolled once it
	// passes.
	WaitRestarted(ctx context.Context, st planner.ClusterState, ordinal int, since time.Time) error

	// Restarting, PartitionLowered and Recreated are the member's typed events; Say is a line of progress.
	Restarting(step planner.Step, pod, message string)
	PartitionLowered(ordinal int, pod, message string)
	Recreated(ordinal int, pod, message string)
	Say(step planner.Step, format string, args ...any)
}

// Outage is the measure of a one-member etcd's write outage while its only member restarts.
type Outage interface {
	// Watch starts reading through the member again, once its pod is recreated.
	Watch(ctx context.Context)
	// End stops the measure and reports it; passed says the member passed its gates.
	End(ctx context.Context, passed bool)
}

// Restart restarts the step's member (a StepLowerPartition) once the gate permits it. cleared says the gate
// let it go; false with a nil error is a hold: the run looks again and plans anew.
func Restart(ctx context.Context, eng Engine, st planner.ClusterState, step planner.Step) (cleared bool, err error) {
	permit, clear, err := eng.ClearToDisrupt(ctx, st, step)
	if err != nil || !clear {
		return false, err
	}
	return true, roll(ctx, eng, st, step, permit)
}

// roll lowers the partition to the member's ordinal and locks it again as soon as the StatefulSet controller
// has recreated that pod at the update revision, before the pod is Ready or etcd healthy: from then on a
// template written by someone else (another stack, kubectl) cannot make the controller take a second member
// while this one is still catching up. Then it waits for the member's gates.
func roll(ctx context.Context, eng Engine, st planner.ClusterState, step planner.Step, permit gate.Permit) (err error) {
	pod := st.Members[step.Ordinal].Pod
	if permit.Kind != gate.Restart || permit.Ordinal != step.Ordinal {
		return fmt.Errorf("internal: restarting %s under %s", pod, permit)
	}
	eng.Restarting(step, pod, fmt.Sprintf("restarting %s (partition %d)", pod, step.Ordinal))
	start := time.Now()
	outage, err := eng.MeterOutage(ctx, st, step.Ordinal)
	if err != nil {
		return err
	}
	if outage != nil {
		defer func() { outage.End(context.WithoutCancel(ctx), err == nil) }()
	}
	eng.Forget(pod)
	eng.Disrupting(st, step.Ordinal)
	// Conditional on the generation the run observed: a template written since would make the controller
	// restart another member than the one planned.
	if err := eng.LowerPartition(ctx, permit, step.Ordinal); err != nil {
		return fmt.Errorf("rolling %s: %w", pod, err)
	}
	if step.AlreadyDown {
		// Down on an older revision, it costs no quorum to restart; but under OrderedReady the controller
		// never replaces a pod that is not Ready (kubernetes#67250), so the engine deletes it.
		eng.Say(step, "%s is already down: deleting its pod so the controller recreates it at %s", pod, st.UpdateRevision)
		if err := eng.DeleteOnAFreshLook(ctx, st, step.Ordinal); err != nil {
			return fmt.Errorf("rolling %s: %w", pod, err)
		}
	}
	eng.PartitionLowered(step.Ordinal, pod, fmt.Sprintf("partition lowered to %d; waiting for the controller to recreate %s at %s", step.Ordinal, pod, st.UpdateRevision))
	if err := eng.WaitPodRecreated(ctx, st, step.Ordinal, start); err != nil {
		return fmt.Errorf("rolling %s: %w", pod, err)
	}
	if outage != nil {
		outage.Watch(ctx)
	}
	if err := eng.Lock(ctx, st.Replicas); err != nil {
		return err
	}
	eng.Recreated(step.Ordinal, pod, fmt.Sprintf("%s recreated at %s, partition locked again; waiting for it to be Ready, etcd healthy and caught up", pod, st.UpdateRevision))
	return eng.WaitRestarted(ctx, st, step.Ordinal, start)
}
