// Package progress is what a rollout tells while it runs: the events the engine emits (Event, its kinds and
// typed fields), and the status ConfigMap they are published to (Publisher), which `kubectl wait`, GitOps
// tools and the next preview read back (ParseStatus).
package progress

import (
	"fmt"
	"time"

	"github.com/etcd-rollout/pulumi-etcd-rollout/rollout/internal/planner"
	"github.com/etcd-rollout/pulumi-etcd-rollout/rollout/internal/snapshot"
)

// Event is one line of progress, for a status line in `pulumi up` or the CLI. Its Kind and typed fields are
// what a consumer acts on (the status ConfigMap does); its Message is for people and free to change.
type Event struct {
	Time time.Time
	Kind EventKind
	Step planner.Step
	// Pod is the member an EventMemberRestarting, EventPartitionLowered, EventMemberRecreated,
	// EventMemberReady, EventMemberPassed, EventMemberRolled or EventMemberReverted is about.
	Pod string
	// From and To are the members an EventLeaderMoving or EventLeaderMoved moves the leader between (Step
	// has their ordinals).
	From, To string
	// Blocked is what holds the run, on EventHolding.
	Blocked *planner.BlockedError
	// Elapsed is how long the member has been down since its step began: until its pod was Ready on
	// EventMemberReady, until it passed its gates on EventMemberRolled (MemberTiming.Down). On
	// EventSnapshotStored it is the whole snapshot step: transfer, checks, store and read back.
	Elapsed time.Duration
	// Plan is the run's plan, on EventPlanned.
	Plan *planner.Plan
	// Summary is the run's one-line account (Result.Summary), on EventDone.
	Summary string
	// PreviousHolder is the holder whose stale lease was taken over, on EventTookOver.
	PreviousHolder string
	// Snapshot is the stored snapshot, on EventSnapshotStored.
	Snapshot *snapshot.Record
	// WriteOutage is set on EventWriteOutage.
	WriteOutage *WriteOutage
	Message     string
}

// EventKind says what an Event reports, in the way client-go's leader-election callbacks name transitions:
// the kinds a consumer may act on, and EventProgress for every other line.
type EventKind string

const (
	// EventProgress is a step begun, a wait, a hold: text for people only.
	EventProgress EventKind = ""
	// EventPlanned carries the run's plan (once per run, before its first step).
	EventPlanned EventKind = "Planned"
	// EventMemberRestarting is a member about to be restarted onto the update revision (its step begins: the
	// lease is confirmed and the partition lowered next).
	EventMemberRestarting EventKind = "MemberRestarting"
	// EventLeaderMoving is a leader transfer about to be asked for (the lease is confirmed first).
	EventLeaderMoving EventKind = "LeaderMoving"
	// EventLeaderMoved is a leader transfer done: To reports itself leader.
	EventLeaderMoved EventKind = "LeaderMoved"
	// EventPartitionLowered is the partition lowered to a restarting member's ordinal: the StatefulSet
	// controller recreates its pod next.
	EventPartitionLowered EventKind = "PartitionLowered"
	// EventMemberRecreated is that member's pod recreated at the update revision and the partition locked
	// again: the member's wait for Ready and its etcd gates begin.
	EventMemberRecreated EventKind = "MemberRecreated"
	// EventMemberReady is a restarted member's pod Ready on the revision it should run: its etcd gate
	// begins. Elapsed is the time since its step began.
	EventMemberReady EventKind = "MemberReady"
	// EventMemberPassed is a member this step did not restart (already on the update revision) that passed
	// its gates.
	EventMemberPassed EventKind = "MemberPassed"
	// EventMemberRolled is a member restarted onto the update revision that passed its gates.
	EventMemberRolled EventKind = "MemberRolled"
	// EventMemberReverted is a member brought back on the current revision after it failed the new one.
	EventMemberReverted EventKind = "MemberReverted"
	// EventMemberTakenBack is a member the run had counted passed or rolled that it counts no more (Pod):
	// someone else replaced its pod, it did not stay up, or it is not healthy on the revision as the run ends.
	// The status ConfigMap counts it not done again, as the run's result no longer reports it.
	EventMemberTakenBack EventKind = "MemberTakenBack"
	// EventCoolingDown is the cool-down after a restarted member passed its gates.
	EventCoolingDown EventKind = "CoolingDown"
	// EventHolding is a run that cannot take its next step yet (Blocked says why) and waits, up to its ready
	// or health timeout, for the cluster to allow it.
	EventHolding EventKind = "Holding"
	// EventUnblocked is the end of a hold: the run takes its next step.
	EventUnblocked EventKind = "Unblocked"
	// EventDowngradeReady is etcd's downgrade enabled and waited for (Step.Version): the cluster version and
	// every member's storage version are the older minor, so a member may restart on it next.
	EventDowngradeReady EventKind = "DowngradeReady"
	// EventSnapshotStored is the snapshot before a point of no return taken, verified and stored (Snapshot);
	// EventSnapshotSkipped is the run going on without one, as Config.ProceedWithoutSnapshot allows.
	EventSnapshotStored  EventKind = "SnapshotStored"
	EventSnapshotSkipped EventKind = "SnapshotSkipped"
	// EventWriteOutage is the measured write outage of a one-member etcd's restart (Result.WriteOutage).
	EventWriteOutage EventKind = "WriteOutage"
	// EventTookOver is the stale lease of a run that died taken over (Run, and Unlock).
	EventTookOver EventKind = "TookOver"
	// EventDone is a complete run: every member on the update revision and healthy, the partition locked.
	EventDone EventKind = "Done"
)

// WriteOutage is the measured cost of restarting a one-member etcd's only member (Config.AcceptWriteOutage):
// the last successful linearizable read before the restart to the first one after it (internal/outage).
type WriteOutage struct {
	Pod string
	// LastReadBefore is the last successful linearizable read before the restart; FirstReadAfter the first after
	// it, zero when the member was not back when the run stopped measuring (Back false).
	LastReadBefore time.Time
	FirstReadAfter time.Time
	// Duration is FirstReadAfter - LastReadBefore, or the outage so far when the member was not back.
	Duration time.Duration
	Back     bool
	// Precision is the interval between reads once the pod is recreated: the outage is known to within it.
	Precision time.Duration
	// Elections is what the restart cost in Raft terms: the only member campaigns when it starts (1), from its
	// term before the restart and after it; -1 when the term after could not be read.
	Elections int
}

// String says what the restart of the only member cost, in the summary's words.
func (o WriteOutage) String() string {
	elections := "its election not read"
	if o.Elections >= 0 {
		elections = planner.Plural(o.Elections, "election", "elections") + " of its own"
	}
	if !o.Back {
		return fmt.Sprintf("write outage of %s, the only member: %s so far, not back when the run stopped measuring", o.Pod, o.Duration.Round(10*time.Millisecond))
	}
	return fmt.Sprintf("write outage of %s, the only member (accepted): %s, to within %s; %s", o.Pod,
		o.Duration.Round(10*time.Millisecond), o.Precision, elections)
}
