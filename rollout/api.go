// Package rollout rolls an etcd StatefulSet one member at a time without uncontrolled Raft elections.
//
// The StatefulSet is kept locked (RollingUpdate with partition == replicas) so that a template change rolls
// nothing by itself. The engine then, for each ordinal from N-1 down to 0: moves the Raft leader off the
// member it is about to restart (MoveLeader, sent to the current leader), lowers the partition to that
// ordinal, and waits until the new pod is at the StatefulSet's updateRevision, Ready, and etcd says the member
// is a healthy, caught-up voter. The partition goes back to replicas on every exit path.
//
// The package has two halves: a pure planner (PlanRollout: observed state in, steps out), and an executor
// (Engine.Run) that re-observes the live cluster before every step, so it is idempotent and resumes
// wherever an earlier run stopped. It imports nothing from Pulumi.
package rollout

import (
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/etcd-rollout/pulumi-etcd-rollout/rollout/internal/durability"
	"github.com/etcd-rollout/pulumi-etcd-rollout/rollout/internal/member"
	"github.com/etcd-rollout/pulumi-etcd-rollout/rollout/internal/probes"
	"github.com/etcd-rollout/pulumi-etcd-rollout/rollout/internal/replace"
	"github.com/etcd-rollout/pulumi-etcd-rollout/rollout/internal/selfremoval"
)

// Defaults keep the old rollout Job's behaviour where it had one.
const (
	DefaultClientPort    = 2379
	DefaultCooldown      = 30 * time.Second
	DefaultReadyTimeout  = 300 * time.Second
	DefaultHealthTimeout = 60 * time.Second
)

// TLSFiles names the client certificate files as they are mounted inside the etcd container. The engine finds
// the volume mounted at those paths and reads the material from its Secret (or by exec into the pod when the
// volume is not a Secret). The material stays in memory; it is never logged or persisted.
type TLSFiles struct {
	CAFile   string
	CertFile string
	KeyFile  string
}

// LeaderPolicy decides where the Raft leader is moved before a member restarts.
type LeaderPolicy string

const (
	// LeaderLazy moves the leader only when it sits on the next member to roll, and then to an
	// already-updated voting member when one exists (else to the lowest ordinal not about to roll).
	LeaderLazy LeaderPolicy = "lazy"
	// LeaderJobLike reproduces the old rollout Job: leader to member 0 first, then to member N-1 before
	// member 0 rolls. Kept for the side-by-side benchmark.
	LeaderJobLike LeaderPolicy = "job-like"
)

// FailurePolicy decides what happens to a member that does not pass its gates on the new revision.
type FailurePolicy string

const (
	// FailureRevert deletes the failed member's pod with the partition locked, so the StatefulSet controller
	// recreates it at the current (old) revision, waits for it to pass every gate again, and then fails the
	// run: the cluster is back on N healthy members instead of N-1 until a person acts.
	FailureRevert FailurePolicy = "revert"
	// FailureStop re-locks the partition and fails the run, leaving the member as it is for a person to look at.
	FailureStop FailurePolicy = "stop"
)

// Config is one rollout of one StatefulSet. NewConfig fills the defaults; Validate says what is wrong with it.
type Config struct {
	StatefulSet string
	Namespace   string
	ServiceName string
	ClientPort  int
	TLS         *TLSFiles

	// Cooldown is waited after each member has passed its health gate. Zero means no cool-down.
	Cooldown time.Duration
	// ReadyTimeout bounds, per member, the wait for the new pod to be at updateRevision and Ready.
	ReadyTimeout time.Duration
	// HealthTimeout bounds, per member, the wait for etcd to call the member healthy and caught up.
	HealthTimeout time.Duration

	LeaderPolicy LeaderPolicy
	// OnFailure is what happens to a member that fails its gates on the new revision (default FailureRevert).
	OnFailure FailurePolicy
	// AcceptPreStopMemberRemoval rolls pods whose preStop hook removes their own member from etcd (the Bitnami
	// chart's removeMemberOnContainerTermination): without it such a roll is refused before anything is touched,
	// as every restart would then remove a voter with no quorum check, racing the rollout.
	AcceptPreStopMemberRemoval bool
	// AcceptWriteOutage rolls a one-member etcd: its only member restarts, so every read and write stops until
	// it is back (quorum 1 of 1). Without it such a roll is refused before anything is touched. With it the
	// run stores a verified snapshot first (always: no peer holds the data) and reports the measured outage
	// (Result.WriteOutage). It never allows the roll of a member whose data dies with its pod.
	AcceptWriteOutage bool

	// SnapshotTo is where the snapshot taken before a point of no return is stored: a directory, or a file://,
	// s3://, gs:// or azblob:// URL (DefaultSnapshotDir when empty). ProceedWithoutSnapshot lets such a roll go
	// on when its snapshot fails (Result.SnapshotSkipped says why); without it the run stops before its first
	// restart.
	SnapshotTo             string
	ProceedWithoutSnapshot bool

	// Holder names this rollout in the StatefulSet's Lease; it is shown to a second rollout that is refused.
	Holder string
	// TemplateVersion is the caller's name for the template this run rolls to (the Pulumi versionHash). It is
	// published next to the target revision in the status ConfigMap, so that a preview after a stopped run
	// can tell that template is applied already and plan only the members left. Optional.
	TemplateVersion string
}

// MemberState is what was observed of one ordinal: its pod and its etcd member.
type MemberState struct {
	Ordinal int
	Pod     string

	PodExists bool
	// PodUID tells the pod that was observed from one the controller created since, so a delete never hits a
	// replacement.
	PodUID string
	// certRefusal is why the engine refused the certificate the member serves, when it did: a refusal every
	// member met alike is said once.
	certRefusal *member.MemberCertError
	// Restarts is the kubelet's count of container restarts in the pod: with PodUID it names the etcd
	// process that answers (a container restarted in the same pod is a new process, which loads its trust
	// and its files anew).
	Restarts int32
	// Revision is the pod's controller-revision-hash label.
	Revision string
	// SelfRemoval are the pod's preStop hooks that remove its member from etcd: they run when the pod stops.
	SelfRemoval []selfremoval.Hook
	// V2Enabled says its pod's etcd runs with --enable-v2 (or ETCD_ENABLE_V2): it may hold v2 data, which 3.6
	// will not start on (CheckV2Store).
	V2Enabled bool
	// DataLost says the pod keeps its etcd data dir or WAL dir where deleting the pod loses it (an emptyDir, no
	// volume): DataWhy says where, for a person.
	DataLost bool
	DataWhy  string
	Ready    bool
	// ReadySince is when the pod last turned Ready (its condition's lastTransitionTime, by the node's clock).
	ReadySince time.Time
	// Image is what the pod's etcd container runs: the version a member is rolled from.
	Image string

	// Reachable is true when the member answered the Status RPC; the fields below are valid only then.
	Reachable    bool
	MemberID     uint64
	IsLeader     bool
	IsLearner    bool
	RaftTerm     uint64
	RaftIndex    uint64
	AppliedIndex uint64
	// ServerVersion is the version the member runs by its own word (Status RPC: "3.5.35"); StorageVersion
	// is its data's schema version, reported by etcd 3.6 and later only ("3.6.0"; empty otherwise). The
	// image tag (Image) is only a hint, for members that do not answer.
	ServerVersion  string
	StorageVersion string
	// DowngradeTarget is the version etcd's downgrade API is enabled for, as this member reports it; empty
	// when none is (and always before etcd 3.6).
	DowngradeTarget string
	// Healthy is etcd's word: the member answered a health check (a linearizable read through it).
	Healthy bool
	// Problem says, for a person, why the member is not reachable or not healthy; Reason says the same for
	// code, which decides on it.
	Problem string
	Reason  ProblemReason
	// LeaderID is the member ID of the leader this member follows, by its own Status answer (its own ID when
	// it leads); 0 when it sees no leader or did not answer. A member that does not answer us may still lead:
	// the others' LeaderID says so.
	LeaderID uint64
	// Running says the pod's phase is Running; with Ready (and, under minReadySeconds, ReadySince) it is what
	// the StatefulSet controller waits for before it acts on any pod under OrderedReady.
	Running bool
	// Proven says the executor saw this member pass its gates on UpdateRevision in the current run. A member
	// at UpdateRevision that is not proven (an earlier run left it there, while UpdateRevision is not yet the
	// current revision) is waited for with the full stability window before anything else is disrupted, and
	// takes no leadership until then. Observe never sets it; the planner alone reads it.
	Proven bool
	// Unseen says the look never reached the member's etcd (no port-forward could be opened, or one that had
	// answered ended under it): Problem says why, and nothing is known of the member, which may be healthy.
	Unseen bool
}

// ClusterState is one observation of the StatefulSet and its members, taken as a whole.
type ClusterState struct {
	StatefulSetUID string
	// Generation is the StatefulSet's metadata.generation: the executor compares it between steps to notice
	// spec changes (partition, template, replicas) made by someone else.
	Generation      int64
	Replicas        int
	Partition       int // -1 when the update strategy is not RollingUpdate
	UpdateRevision  string
	CurrentRevision string
	// TemplateImage is the etcd container's image in the pod template: the version members are rolled to.
	TemplateImage string
	Members       []MemberState // indexed by ordinal, len == Replicas
	// ClusterVersion is the version the cluster runs at, from /version of one healthy member ("3.5.0"):
	// the lowest minor any member runs, moved by etcd itself; empty when no healthy member answered.
	ClusterVersion string
	// TemplateSettings are the etcd flags and ETCD_* variables of the template's etcd container: what the
	// members will be started with, checked against the version they roll to.
	TemplateSettings []EtcdSetting
	// VotingMembers is the etcd member list's count of voting members, as the leader reports it.
	VotingMembers int
	Learners      int
	// OrderedReady says the StatefulSet's podManagementPolicy is OrderedReady (the default): the controller
	// then neither rolls nor recreates any pod while one is not Running and Ready (and available for
	// MinReadySeconds), whatever etcd says.
	OrderedReady    bool
	MinReadySeconds int
	// Durability is where the template's etcd keeps its data dir (and WAL dir) and whether each outlives the
	// pod: a member whose data dies with its pod must be replaced, never restarted under its old identity.
	Durability []durability.Dir
	// SelfRemoval are the template's preStop hooks that remove a member from etcd when its pod stops.
	SelfRemoval []selfremoval.Hook
	// ProbeWarnings are the template etcd container's probes that turn a roll's hiccup into an outage (a
	// liveness probe that needs quorum, or gives up too soon; readiness on /health): preview and `plan` warn,
	// the roll goes on, since the engine gates on etcd's word whatever the kubelet probes.
	ProbeWarnings []ProbeFinding
	// TemplateInitialClusterState is the template's --initial-cluster-state (or ETCD_INITIAL_CLUSTER_STATE, or
	// its --config-file's initial-cluster-state), as written ("" when it does not say): a replaced member must
	// start with "existing".
	TemplateInitialClusterState string
	// TemplateInitialClusterStateOmitted says the template visibly starts etcd without an initial cluster
	// state (its whole command line and variables, or its config file, read): etcd's default, "new", applies,
	// and a replaced member cannot join as its learner. False where a script or a variable from elsewhere
	// may set it.
	TemplateInitialClusterStateOmitted bool
	// PeerURLFromPodIP is how the template builds etcd's advertised peer URL from the pod's IP ("" when it does
	// not): a variable of the downward API's status.podIP, or the shell's hostname -i.
	PeerURLFromPodIP string
	// Membership is etcd's member list as the leader (else any member that answered) gave it; MembershipKnown
	// says one did (an empty list read from nobody is not "nobody is a member").
	Membership      []member.Info
	MembershipKnown bool
	// podTemplate is the StatefulSet's pod template as observed: what a restarted member starts from (the
	// trust check reads its peer TLS material). Unexported: it is the API object, not a plan input.
	podTemplate *corev1.PodSpec
	// Replacing are the replacements in flight (records a run wrote before removing a member whose data dies
	// with its pod), by ordinal; read only when some member's data dies with its pod.
	Replacing map[int]replace.Record
	// MaxUnavailable is how many pods the StatefulSet controller may take down at once in a rolling update, as
	// it resolves spec.updateStrategy.rollingUpdate.maxUnavailable (1 when unset; Kubernetes 1.35 and later
	// honour it by default, the MaxUnavailableStatefulSet feature).
	MaxUnavailable int
	// ObservedAt is when the observation was taken, by this process's clock: what MinReadySeconds is
	// counted to.
	ObservedAt time.Time
}

// StepKind is one kind of action in a plan.
type StepKind string

const (
	StepLock           StepKind = "lock"            // set partition = replicas (and skipAwait) before anything
	StepTransferLeader StepKind = "transfer-leader" // MoveLeader From -> To
	StepLowerPartition StepKind = "lower-partition" // partition = Ordinal: the StatefulSet controller recreates that pod
	// StepReplace replaces a member whose data dies with its pod: remove it, let its pod go, add its peer URL
	// back as a learner, promote it once caught up (internal/replace decides each next step).
	StepReplace    StepKind = "replace"
	StepWaitMember StepKind = "wait-member" // pod at updateRevision and Ready, then etcd health gates
	StepCooldown   StepKind = "cooldown"
	// StepRecreate deletes a member's pod while the partition is locked, so the controller recreates it at
	// the current revision: the revert of a member that failed on the new revision, and the revival of a
	// member that is already down on a revision it will not start from. It costs no quorum: the member is out.
	StepRecreate StepKind = "recreate"
	StepRelock   StepKind = "relock" // partition = replicas
	// StepEnableDowngrade asks etcd to validate and enable a downgrade to Version (a minor, "3.5"), then waits
	// until the cluster version and every member's storage version are that minor: only then may a member
	// restart on the older binary (etcd refuses to start a server older than the cluster version).
	StepEnableDowngrade StepKind = "enable-downgrade"
)

// Step is one action. Ordinal is the member rolled or waited for; From and To are ordinals of a transfer.
type Step struct {
	Kind    StepKind
	Ordinal int
	From    int
	To      int
	// AlreadyDown marks a lower-partition step for a member that is down on an older revision: restarting it
	// costs no quorum, and its pod is deleted if the controller does not replace it (OrderedReady never
	// replaces a pod that is not Ready).
	AlreadyDown bool
	// Version is the minor an enable-downgrade step lowers the cluster to ("3.5").
	Version string `json:",omitempty"`
}

// Plan is the ordered list of steps for one observation. Its String form is what `pulumi preview` shows and
// is stable: the same state always prints the same text.
type Plan struct {
	Steps []Step
	// Roll lists the ordinals that will be restarted, in order.
	Roll []int
	// Replace lists the ordinals of Roll that are replaced, not restarted: their data dies with their pod.
	Replace []int
	// Members says, per member, where its data lives and how it is rolled when it is (issue 32).
	Members []MemberPlan
	// Wait lists the ordinals already at updateRevision whose health gate must still pass (a resumed run
	// whose previous attempt stopped while that member was coming back).
	Wait []int
	// Transfers is the number of planned leader transfers.
	Transfers int

	// Pods names each ordinal's pod, so the plan prints names a person recognises.
	Pods []string
	// UpdateRevision is the revision every member will be at when the plan is done.
	UpdateRevision string
	// Cooldown is the pause between members, as configured; zero when the plan was made without a Config.
	Cooldown time.Duration
	// VersionMove is set when the roll changes etcd's minor version: the cluster version moves once the last
	// old member has rolled, and from then on a failed member can only be fixed forward.
	VersionMove *VersionMove
	// Versions is the version path of the members this plan restarts, from what they report (their image
	// tag when they do not answer) to the template's image tag; nil when neither side is known or the
	// roll changes no version.
	Versions *VersionPath
	// Downgrade is set when the roll lowers etcd's minor version: it goes through etcd's downgrade API.
	Downgrade *DowngradePlan
	// Snapshot is set when the run takes a verified snapshot before its first step: the roll changes etcd's
	// minor version and the cluster version has not moved yet, or it restarts the only member; either way the
	// snapshot is the only way back after it.
	Snapshot *SnapshotPlan
	// WriteOutage is set when the plan restarts the only member of a one-member etcd: writes stop until it is
	// back. Such a plan runs only with Config.AcceptWriteOutage (CheckConsents).
	WriteOutage *WriteOutagePlan
}

// WriteOutagePlan is the restart of a one-member etcd's only member.
type WriteOutagePlan struct {
	Pod string
}

// ProbeFinding is one probe shape preview and `etcd-rollout plan` warn about (rollout/internal/probes).
type ProbeFinding = probes.Finding

// SnapshotPlan is the snapshot a run takes before its first step.
type SnapshotPlan struct {
	// Before is the ordinal of the plan's first restart.
	Before int
	// Required says no setting lets the run go on without it: the restart of the only member, whose data no
	// peer holds (Config.ProceedWithoutSnapshot covers a minor-version change only).
	Required bool
	// To is where it goes (Config.SnapshotTo, or DefaultSnapshotDir); empty in a plan made without a Config.
	To string
}

// Procedure is how a member is rolled.
type Procedure string

const (
	// ProcedureRestart: its pod is recreated and the member comes back under its member ID, with its data.
	ProcedureRestart Procedure = "restart"
	// ProcedureReplace: its data dies with its pod, so it is removed, added back as a learner and promoted.
	ProcedureReplace Procedure = "replace"
)

// MemberPlan is one member's durability and procedure.
type MemberPlan struct {
	Pod string
	// Data is how long its data dir (and WAL dir) lives: a durability.Kind ("SurvivesPod", "DiesWithPod", …).
	Data string
	// DataWhy says, for a person, where it lives ("" when unknown).
	DataWhy   string
	Procedure Procedure
}

// DowngradePlan is how a minor downgrade goes through etcd's downgrade API.
type DowngradePlan struct {
	// Target is the minor the cluster goes down to ("3.5").
	Target string
	// Enabled says etcd's downgrade to Target is enabled already and the cluster version is Target (an
	// earlier run enabled it); otherwise the plan enables it before EnableBefore restarts.
	Enabled      bool
	EnableBefore int
	// Validated says etcd answered `downgrade validate` with success for this plan; set by whoever asked it
	// (Engine.ValidateDowngrade), not by the pure planner.
	Validated bool
}

// VersionMove is a minor-version change of the cluster and the member after which it happens.
type VersionMove struct {
	From, To EtcdVersion
	// After is the ordinal of the last member still on From: its restart is the point of no return.
	After int
}

// Event is one line of progress, for a status line in `pulumi up` or the CLI. Its Kind and typed fields are
// what a consumer acts on (the status ConfigMap does); its Message is for people and free to change.
type Event struct {
	Time time.Time
	Kind EventKind
	Step Step
	// Pod is the member an EventMemberRestarting, EventPartitionLowered, EventMemberRecreated,
	// EventMemberReady, EventMemberPassed, EventMemberRolled or EventMemberReverted is about.
	Pod string
	// From and To are the members an EventLeaderMoving or EventLeaderMoved moves the leader between (Step
	// has their ordinals).
	From, To string
	// Blocked is what holds the run, on EventHolding.
	Blocked *BlockedError
	// Elapsed is how long the member has been down since its step began: until its pod was Ready on
	// EventMemberReady, until it passed its gates on EventMemberRolled (MemberTiming.Down). On
	// EventSnapshotStored it is the whole snapshot step: transfer, checks, store and read back.
	Elapsed time.Duration
	// Plan is the run's plan, on EventPlanned.
	Plan *Plan
	// Summary is the run's one-line account (Result.Summary), on EventDone.
	Summary string
	// PreviousHolder is the holder whose stale lease was taken over, on EventTookOver.
	PreviousHolder string
	// Snapshot is the stored snapshot, on EventSnapshotStored.
	Snapshot *SnapshotRecord
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

// MemberTiming records how long one member's roll took.
type MemberTiming struct {
	Pod string
	// Down is from lowering the partition to the member passing its health gate.
	Down     time.Duration
	Finished time.Time
	// Process names the etcd process that passed the gates (its start time by the member's clock, from
	// /metrics); empty when etcd did not say. The cool-down checks that the same one still serves.
	Process string
}

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

// Result is what a run did. A run that failed still returns what it did before failing.
type Result struct {
	UpdateRevision     string
	MembersRolled      []string
	LeaderTransfers    int
	TermBefore         uint64
	TermAfter          uint64
	UnplannedElections int // TermAfter - TermBefore - LeaderTransfers, never below 0
	// ElectionsUnknown says the run could not measure UnplannedElections (no term was read at its start, or
	// none at its exit, or a leader move of its own cannot be told from an election): the 0 there was not
	// measured. ElectionsUnknownWhy says which, in words.
	ElectionsUnknown    bool
	ElectionsUnknownWhy string
	// movesUnknown counts leader moves whose outcome the run could not tell (countElections).
	movesUnknown int
	// leaseTakenBy is the run that took this run's lease over, whose own leader moves this run's terms count.
	leaseTakenBy string
	Members      []MemberTiming
	StartedAt    time.Time
	FinishedAt   time.Time
	// Failure is the member that failed its gates on the new revision, when one did.
	Failure *Failure
	// ClusterVersion is the cluster version etcd reported at the end of a complete run ("3.6.0"); after a
	// minor-version change, the run waited for it to move (awaitClusterVersion).
	ClusterVersion string
	// Snapshot is the snapshot the run stored before its first step (Plan.Snapshot); SnapshotSkipped says
	// why the run went on without one (Config.ProceedWithoutSnapshot), empty when it did not.
	Snapshot        *SnapshotRecord
	SnapshotSkipped string
	// WriteOutage is what the restart of a one-member etcd's only member cost (Config.AcceptWriteOutage); nil
	// when the run restarted no such member.
	WriteOutage *WriteOutage
	// APIRequests is how many requests the run sent to the API server (reads, writes, the Lease, Events,
	// the upgrade requests of port-forwards); 0 when the Engine was given a clientset instead of a RestConfig.
	APIRequests int
	// TrustChecks is what the run's TLS trust checks before restarts cost (issue 33); zero for members
	// without TLS.
	TrustChecks TrustCheckCost
}

// TrustCheckCost is what trust checks cost: how many were made, the members' ports they probed (a TLS
// connection each, through the port-forward), their wall time, and the API requests sent meanwhile (the
// port-forwards they opened, the Secrets they read; a request of the run's own made at the same moment,
// such as a Lease renewal, counts too).
type TrustCheckCost struct {
	Checks, Probes, APIRequests int
	Duration                    time.Duration
}

// plus is c and d together.
func (c TrustCheckCost) plus(d TrustCheckCost) TrustCheckCost {
	return TrustCheckCost{Checks: c.Checks + d.Checks, Probes: c.Probes + d.Probes,
		APIRequests: c.APIRequests + d.APIRequests, Duration: c.Duration + d.Duration}
}

// minus is the cost since before, of a running total.
func (c TrustCheckCost) minus(before TrustCheckCost) TrustCheckCost {
	return TrustCheckCost{Checks: c.Checks - before.Checks, Probes: c.Probes - before.Probes,
		APIRequests: c.APIRequests - before.APIRequests, Duration: c.Duration - before.Duration}
}

// Failure records a member that did not pass its gates on a revision, so the next preview can say so before
// anybody re-runs a known-bad template.
type Failure struct {
	Pod      string
	Revision string
	Gate     string
	LastSeen string
	At       time.Time
	// RevertedTo is the revision the member was brought back to; empty when it was not reverted.
	RevertedTo string
	// RevertError says why a revert was refused or did not finish; empty when it was not attempted or worked.
	RevertError string
}

// The executor's surface (Engine: engine.go and engine_*.go; a run's steps: run.go and run_*.go):
//
//	func NewConfig(sts, namespace, service string) Config              // defaults filled, Holder = etcd-rollout@host/pid
//	func (c Config) Validate() error                                    // every bad field, named as the user wrote it
//	func DefaultSnapshotDir() string                                    // where a run's snapshot goes without Config.SnapshotTo
//	func (c Config) SnapshotDestination() string                        // SnapshotTo, or DefaultSnapshotDir
//	func CheckSnapshotDestination(raw string) error                     // ErrBadSnapshotDestination: refused before anything is touched
//	func PlanRollout(s ClusterState, policy LeaderPolicy) (Plan, error) // pure; wraps ErrBlocked when the state blocks a roll
//	func CheckConsents(s ClusterState, p Plan, cfg Config) error        // ErrPreStopRemovesMember, ErrSingleMember: a consent cfg lacks
//	func New(cfg Config, opts Options) (*Engine, error)                 // contacts nothing yet
//	func (e *Engine) Observe(ctx context.Context) (ClusterState, error)
//	func (e *Engine) Plan(ctx context.Context) (ClusterState, Plan, error)
//	func (e *Engine) Run(ctx context.Context) (Result, error)           // returns the partial Result on error too
//	func (e *Engine) Unlock(ctx context.Context) error                  // partition = replicas, release a stale lease
//	func (e *Engine) ValidateDowngrade(ctx context.Context, st ClusterState, target string) error // etcd's `downgrade validate`
//	func (e *Engine) CheckTrust(ctx context.Context, st ClusterState, ordinals []int) error // ErrPeerTrust, ErrClientTrust: peers or clients would refuse the restart
//	func (e *Engine) LeaseHolder(ctx context.Context) (string, time.Duration, error) // who holds the rollout lease, for how long yet
//	func (e *Engine) RolloutStatus(ctx context.Context) (RolloutStatus, bool, error) // the status ConfigMap, parsed
//	func (e *Engine) Snapshot(ctx context.Context, opts SnapshotOptions) (SnapshotRecord, error) // from the leader, verified, stored
//	func (e *Engine) MemberTrust(ctx context.Context, st ClusterState) []MemberTrust // the CAs each member's process trusts, as announced
//	func (e *Engine) Config() Config
//	func (e *Engine) Close() error
//	func (r Result) Summary() string
//	func FailureOutcome(revertedTo, revertError string) string
//	func LeaseName(sts string) string
//	func StatusConfigMapName(sts string) string; func ParseStatus(data map[string]string) RolloutStatus
//	func RunIdentity() string                                           // this process, for a lease holder name
//	func Quorum(n int) int
//	func EtcdContainer(cs []corev1.Container) *corev1.Container; func EtcdSettings(c *corev1.Container) []EtcdSetting
//	func JudgeProbes(c *corev1.Container) []ProbeFinding               // what the preview warns about a template's probes
//	func ParseVersion(s string) (EtcdVersion, bool); func ImageVersion(image string) (EtcdVersion, bool)
//	func CheckVersionPath(from, to EtcdVersion) error; func CheckImagePath(template string, members map[string]string) error
//	func CheckV2Store(template string, v2Members []string) error; func V2Enabled(c *corev1.Container) bool
//	func CheckFlags(settings []EtcdSetting, target EtcdVersion) error; func CheckContainerFlags(c *corev1.Container, target EtcdVersion) error
//	func GatePreview(ctx context.Context, live LiveChecks, cfg Config, st ClusterState, plan *Plan, planErr error) error // the gate's Preview sequence
//	func GatePreflight(c *corev1.Container, memberImages map[string]string, v2Members []string) error // the gate's Preflight sequence
//
// The checks above are the gate's parts, public for callers that judge one thing on its own; a caller about to
// show or start a rollout asks the gate (GatePreview, GatePreflight), which runs them all in the one order every
// procedure of the engine keeps (rollout/internal/gate). Its refusals keep the checks' typed errors; a preview's
// downgrade that etcd did not validate is a *DowngradeNotValidatedError.
//
// Options carries the cluster access (RestConfig, or Kube), the member Dialer (memberdial.NewPortForward by
// default; memberdial.NewDirect for callers inside the cluster), the OnEvent progress callback, the lease
// duration and the poll interval. Errors to branch on: ErrBlocked (nothing was changed; *BlockedError says
// why; with ErrSingleMember or ErrVersionPath a block waiting cannot fix, returned at once), ErrInterference
// (*InterferenceError names the writer), ErrLeaseLost, ErrPartitionNotLocked (the exit could not re-lock),
// ErrMemberUnseen, ErrNotRecreated, ErrNoSnapshot (with ErrBlocked: a minor change's snapshot failed and
// nothing restarted), ErrSnapshotCorrupt and ErrBadSnapshotDestination (Snapshot), *LockedError (another run
// holds the lease),
// *GateTimeoutError (member, gate, last seen and its ProblemReason), *RevertedError, *MemberProblemError (a
// member whose problem waiting cannot fix). Events carry an EventKind with typed fields; MemberState a
// ProblemReason.
