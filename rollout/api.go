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

	"github.com/etcd-rollout/pulumi-etcd-rollout/rollout/internal/progress"
	"github.com/etcd-rollout/pulumi-etcd-rollout/rollout/internal/tlsmaterial"
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
type TLSFiles = tlsmaterial.Files

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

// Event is one line of progress, for a status line in `pulumi up` or the CLI (internal/progress). Its Kind and
// typed fields are what a consumer acts on (the status ConfigMap does); its Message is for people.
type Event = progress.Event

// EventKind says what an Event reports.
type EventKind = progress.EventKind

// The kinds of Event (progress.EventKind).
const (
	EventProgress         = progress.EventProgress
	EventPlanned          = progress.EventPlanned
	EventMemberRestarting = progress.EventMemberRestarting
	EventLeaderMoving     = progress.EventLeaderMoving
	EventLeaderMoved      = progress.EventLeaderMoved
	EventPartitionLowered = progress.EventPartitionLowered
	EventMemberRecreated  = progress.EventMemberRecreated
	EventMemberReady      = progress.EventMemberReady
	EventMemberPassed     = progress.EventMemberPassed
	EventMemberRolled     = progress.EventMemberRolled
	EventMemberReverted   = progress.EventMemberReverted
	EventMemberTakenBack  = progress.EventMemberTakenBack
	EventCoolingDown      = progress.EventCoolingDown
	EventHolding          = progress.EventHolding
	EventUnblocked        = progress.EventUnblocked
	EventDowngradeReady   = progress.EventDowngradeReady
	EventSnapshotStored   = progress.EventSnapshotStored
	EventSnapshotSkipped  = progress.EventSnapshotSkipped
	EventWriteOutage      = progress.EventWriteOutage
	EventTookOver         = progress.EventTookOver
	EventDone             = progress.EventDone
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

// WriteOutage is the measured cost of restarting a one-member etcd's only member (Config.AcceptWriteOutage).
type WriteOutage = progress.WriteOutage

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
//	func planner.CheckConsents(s ClusterState, p Plan, cfg Config) error        // ErrPreStopRemovesMember, ErrSingleMember: a consent cfg lacks
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
//	func lease.Name(sts string) string
//	func StatusConfigMapName(sts string) string; func ParseStatus(data map[string]string) RolloutStatus
//	func RunIdentity() string                                           // this process, for a lease holder name
//	func Quorum(n int) int
//	func EtcdContainer(cs []corev1.Container) *corev1.Container; func EtcdSettings(c *corev1.Container) []EtcdSetting
//	func JudgeProbes(c *corev1.Container) []ProbeFinding               // what the preview warns about a template's probes
//	func planner.ParseVersion(s string) (EtcdVersion, bool); func ImageVersion(image string) (EtcdVersion, bool)
//	func CheckVersionPath(from, to EtcdVersion) error; func CheckImagePath(template string, members map[string]string) error
//	func CheckV2Store(template string, v2Members []string) error; func V2Enabled(c *corev1.Container) bool
//	func planner.CheckFlags(settings []EtcdSetting, target EtcdVersion) error; func planner.CheckContainerFlags(c *corev1.Container, target EtcdVersion) error
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
