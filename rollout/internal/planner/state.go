package planner

import (
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/etcd-rollout/pulumi-etcd-rollout/rollout/internal/durability"
	"github.com/etcd-rollout/pulumi-etcd-rollout/rollout/internal/memberlist"
	"github.com/etcd-rollout/pulumi-etcd-rollout/rollout/internal/probes"
	"github.com/etcd-rollout/pulumi-etcd-rollout/rollout/internal/replace"
	"github.com/etcd-rollout/pulumi-etcd-rollout/rollout/internal/selfremoval"
)

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

// MemberState is what was observed of one ordinal: its pod and its etcd member.
type MemberState struct {
	Ordinal int
	Pod     string

	PodExists bool
	// PodUID tells the pod that was observed from one the controller created since, so a delete never hits a
	// replacement.
	PodUID string
	// CertRefusal is why the engine refused the certificate the member serves, when it did, without the
	// member's name (member.MemberCertError's SharedCause): a refusal every member met alike is said once. ""
	// when none was, or when the refusal is the member's own (a certificate valid for another member's names).
	CertRefusal string
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
	Membership      []memberlist.Member
	MembershipKnown bool
	// PodTemplate is the StatefulSet's pod template as observed: what a restarted member starts from (the
	// trust check reads its peer TLS material). The planner never reads it: it is the API object, not a plan
	// input, and it is left out of the state's JSON.
	PodTemplate *corev1.PodSpec `json:"-"`
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
