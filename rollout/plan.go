package rollout

import (
	corev1 "k8s.io/api/core/v1"

	"github.com/etcd-rollout/pulumi-etcd-rollout/rollout/internal/planner"
)

// The planner is pure and lives below the engine (internal/planner): observed state in, steps out. These are
// its names as the rollout package has always offered them, so that a caller needs only this package.

type (
	BlockedError       = planner.BlockedError
	ClusterState       = planner.ClusterState
	DowngradePlan      = planner.DowngradePlan
	EtcdSetting        = planner.EtcdSetting
	EtcdVersion        = planner.EtcdVersion
	FlagRefusal        = planner.FlagRefusal
	FlagsError         = planner.FlagsError
	LeaderPolicy       = planner.LeaderPolicy
	MemberPlan         = planner.MemberPlan
	MemberProblemError = planner.MemberProblemError
	MemberState        = planner.MemberState
	Plan               = planner.Plan
	ProbeFinding       = planner.ProbeFinding
	ProblemReason      = planner.ProblemReason
	Procedure          = planner.Procedure
	SnapshotPlan       = planner.SnapshotPlan
	Step               = planner.Step
	StepKind           = planner.StepKind
	VersionMove        = planner.VersionMove
	VersionPath        = planner.VersionPath
	WriteOutagePlan    = planner.WriteOutagePlan
)

const (
	MinPatchBefore36          = planner.MinPatchBefore36
	LeaderJobLike             = planner.LeaderJobLike
	LeaderLazy                = planner.LeaderLazy
	ProblemCertificateRefused = planner.ProblemCertificateRefused
	ProblemDownAfterPassing   = planner.ProblemDownAfterPassing
	ProblemEtcdErrors         = planner.ProblemEtcdErrors
	ProblemForbidden          = planner.ProblemForbidden
	ProblemNoLeader           = planner.ProblemNoLeader
	ProblemNone               = planner.ProblemNone
	ProblemNotVoting          = planner.ProblemNotVoting
	ProblemPodMissing         = planner.ProblemPodMissing
	ProblemPodTerminating     = planner.ProblemPodTerminating
	ProblemRefusingClients    = planner.ProblemRefusingClients
	ProblemTLSMaterial        = planner.ProblemTLSMaterial
	ProblemUnhealthy          = planner.ProblemUnhealthy
	ProblemUnreached          = planner.ProblemUnreached
	ProcedureReplace          = planner.ProcedureReplace
	ProcedureRestart          = planner.ProcedureRestart
	StepCooldown              = planner.StepCooldown
	StepEnableDowngrade       = planner.StepEnableDowngrade
	StepLock                  = planner.StepLock
	StepLowerPartition        = planner.StepLowerPartition
	StepRecreate              = planner.StepRecreate
	StepRelock                = planner.StepRelock
	StepReplace               = planner.StepReplace
	StepTransferLeader        = planner.StepTransferLeader
	StepWaitMember            = planner.StepWaitMember
)

var (
	ErrVersionPath          = planner.ErrVersionPath
	ErrVersionUnknown       = planner.ErrVersionUnknown
	ErrBlocked              = planner.ErrBlocked
	ErrDataDiesWithPod      = planner.ErrDataDiesWithPod
	ErrFlagRefused          = planner.ErrFlagRefused
	ErrLearnerLeftBehind    = planner.ErrLearnerLeftBehind
	ErrPeerURLFollowsPod    = planner.ErrPeerURLFollowsPod
	ErrPreStopRemovesMember = planner.ErrPreStopRemovesMember
	ErrSingleMember         = planner.ErrSingleMember
	ErrUnsafeStrategy       = planner.ErrUnsafeStrategy
)

// PlanRollout is the plan for one observation: which members roll, in which order, where the leader goes
// first, and what refuses or holds the roll (planner.PlanRollout).
func PlanRollout(s ClusterState, policy LeaderPolicy) (Plan, error) {
	return planner.PlanRollout(s, policy)
}

// EtcdSettings are the etcd flags and ETCD_* variables container c starts etcd with.
func EtcdSettings(c *corev1.Container) []EtcdSetting { return planner.EtcdSettings(c) }

// EtcdFlagValues are container c's etcd flags by name, with their values as written.
func EtcdFlagValues(c *corev1.Container) map[string]string { return planner.EtcdFlagValues(c) }

// ImageVersion is the etcd version an image's tag names ("3.5.21" of "quay.io/coreos/etcd:v3.5.21").
func ImageVersion(image string) (EtcdVersion, bool) { return planner.ImageVersion(image) }

// Truncate cuts s to at most n bytes on a rune boundary and marks the cut: what the engine and the provider
// publish stays bounded and valid UTF-8.
func Truncate(s string, n int) string { return planner.Truncate(s, n) }

// V2Enabled says container c starts etcd with the v2 API enabled (--enable-v2 or ETCD_ENABLE_V2).
func V2Enabled(c *corev1.Container) bool { return planner.V2Enabled(c) }

// EtcdContainer picks the container that runs etcd: by name, then by command or image, else the only one.
func EtcdContainer(cs []corev1.Container) *corev1.Container { return planner.EtcdContainer(cs) }

// JudgeProbes is the probe shapes of etcd container c that turn a roll's hiccup into an outage, as Observe
// judges the live template's into ClusterState.ProbeWarnings: a preview of a template about to be applied
// judges that one.
func JudgeProbes(c *corev1.Container) []ProbeFinding { return planner.JudgeProbes(c) }
