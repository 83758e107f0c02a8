// Package replacement is the procedure for a member whose data dies with its pod (issue 32): it is removed,
// its pod let go, its peer URL added back as a learner and promoted once caught up, never restarted under its
// old member ID. Each pass looks afresh and does the one thing internal/replace names next, so a run killed
// anywhere is resumed by the next.
//
// The procedure decides; the engine that runs it looks, keeps the lease and writes. Every step that takes the
// member down or changes etcd's membership asks the engine's gate first (Engine.ClearToDisrupt,
// Engine.Permit, Engine.PermitRelease) and goes out under the permit it got.
package replacement

import (
	"context"
	"time"

	"github.com/etcd-rollout/pulumi-etcd-rollout/rollout/internal/gate"
	"github.com/etcd-rollout/pulumi-etcd-rollout/rollout/internal/memberlist"
	"github.com/etcd-rollout/pulumi-etcd-rollout/rollout/internal/planner"
	"github.com/etcd-rollout/pulumi-etcd-rollout/rollout/internal/replace"
)

// Engine is what a replacement asks of the run that drives it: fresh looks, the gate's permits, the writes a
// permit lets out, and the reports a person reads. The run implements it (rollout/run_procedures.go).
type Engine interface {
	// Look observes the cluster afresh.
	Look(ctx context.Context) (planner.ClusterState, error)
	// SameTemplate refuses a look whose template is not the one the run rolls to.
	SameTemplate(st planner.ClusterState) error

	// ClearToDisrupt asks the gate to take the step's member down (gate.RemoveMember): a permit, or clear
	// false when the plan must be made again (a hold: the member leads, the others would not keep quorum).
	ClearToDisrupt(ctx context.Context, st planner.ClusterState, step planner.Step) (permit gate.Permit, clear bool, err error)
	// Permit asks the gate for a step of kind on the step's member (gate.ChangeMembership).
	Permit(ctx context.Context, kind gate.Kind, st planner.ClusterState, step planner.Step) (gate.Permit, error)
	// PermitRelease asks the gate to let the removed member's pod go (gate.ReleaseData): by lowering the
	// partition, or else by a delete with the partition locked.
	PermitRelease(ctx context.Context, st planner.ClusterState, step planner.Step, lowering bool) (gate.Permit, error)

	// Disrupting notes that the run is about to disrupt a member: its exit re-locks and reports it.
	Disrupting()
	// ConfirmLease makes sure the run still holds the StatefulSet's lease before a write of its own.
	ConfirmLease(ctx context.Context) error
	// Etcd changes etcd's membership, each call through the member named by via.
	Etcd() Membership
	// DeleteReleased deletes the pod of the removed member, judged again by the gate on a fresh look, under
	// the release PermitRelease granted last.
	DeleteReleased(ctx context.Context, st planner.ClusterState, ordinal int) error
	// LowerPartition lowers the partition to ordinal under permit; WaitPodRecreated waits for the controller
	// to recreate that pod at the update revision; Lock sets the partition back to replicas.
	LowerPartition(ctx context.Context, permit gate.Permit, ordinal int) error
	WaitPodRecreated(ctx context.Context, st planner.ClusterState, ordinal int, since time.Time) error
	Lock(ctx context.Context, replicas int) error
	// WaitVoter waits for the member's gates with the whole stability window, its pod at podRevision ("" the
	// update revision); report, called once the procedure is sure, counts the member rolled.
	WaitVoter(ctx context.Context, st planner.ClusterState, ordinal int, podRevision string, since time.Time) (report func(context.Context), err error)

	// SaveRecord and DeleteRecord keep the replacement's record, which outlives the run.
	SaveRecord(ctx context.Context, ordinal int, rec replace.Record) error
	DeleteRecord(ctx context.Context, ordinal int) error
	// MemberID is the member ID member ordinal answered with in this run (0 when none), SetMemberID the one
	// etcd gave its learner.
	MemberID(ordinal int) uint64
	SetMemberID(ordinal int, id uint64)

	// Replacing, PartitionLowered and Recreated are the member's typed events; Say is a line of progress.
	Replacing(step planner.Step, pod, message string)
	PartitionLowered(ordinal int, pod, message string)
	Recreated(ordinal int, pod, message string)
	Say(step planner.Step, format string, args ...any)
}

// Membership is etcd's membership API, each call sent through the member named by via.
type Membership interface {
	MemberRemove(ctx context.Context, via string, id uint64) error
	MemberAddAsLearner(ctx context.Context, via, peerURL string) (memberlist.Member, error)
	MemberPromote(ctx context.Context, via string, id uint64) error
	// Forget drops the client of pod, whose member is gone.
	Forget(pod string)
}

// Settings bound a replacement: its whole time (the ready and health timeouts), how often it looks, and how
// long one etcd call may take.
type Settings struct {
	Timeout     time.Duration
	PollEvery   time.Duration
	CallTimeout time.Duration
}
