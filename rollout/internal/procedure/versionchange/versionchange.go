// Package versionchange is the procedure around a roll that changes etcd's minor version: a downgrade goes
// through etcd's downgrade API (enabled before the first member restarts on the older binary, which is a
// point of no return the gate must permit), and every run ends what it or an earlier run left of the
// downgrade: cancelled when no member restarted yet or the template does not want it, ended once every member
// runs the target. The member restarts themselves are the restart procedure's.
package versionchange

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/etcd-rollout/pulumi-etcd-rollout/rollout/internal/gate"
	"github.com/etcd-rollout/pulumi-etcd-rollout/rollout/internal/planner"
)

// The Kubernetes Events recorded on the StatefulSet when the engine enables or cancels etcd's downgrade:
// cluster-wide changes an operator should find in `kubectl describe`.
const (
	ReasonEnabled   = "EtcdDowngradeEnabled"
	ReasonCancelled = "EtcdDowngradeCancelled"
)

// CallTimeout bounds one downgrade API call; enable is a Raft proposal, answered within an election timeout
// or two on a healthy cluster.
const CallTimeout = 10 * time.Second

// ErrNoJob is wrapped by a cancel that etcd answered with "no downgrade job": etcd's leader ended it already.
var ErrNoJob = errors.New("etcd has no downgrade job")

// ErrMemberVersion is returned when a finished downgrade or upgrade finds a member whose own version is not
// the template's minor: the image tag said one version and the binary is another.
var ErrMemberVersion = errors.New("a member runs another version than the template's image tag says")

// Engine is what the version change asks of the run that drives it. The run implements it
// (rollout/run_procedures.go).
type Engine interface {
	// Permit asks the gate for a step of kind (gate.PointOfNoReturn: etcd validates the downgrade, the
	// snapshot the plan asks for is stored, the lease is the run's).
	Permit(ctx context.Context, kind gate.Kind, st planner.ClusterState, step planner.Step) (gate.Permit, error)
	// Enabling notes, before the call, that the run enables etcd's downgrade to target: a lost answer may
	// still have enabled it, and the run's exit settles it.
	Enabling(target string)
	// EnableDowngrade enables etcd's downgrade to target under permit; CancelDowngrade cancels it (its error
	// wraps ErrNoJob when etcd has none). Both say the member they asked through.
	EnableDowngrade(ctx context.Context, permit gate.Permit, st planner.ClusterState, target string) (via string, err error)
	CancelDowngrade(ctx context.Context, st planner.ClusterState, target string) (via string, err error)
	// ReportsDowngradeEnabled asks the members whether the downgrade to target is enabled.
	ReportsDowngradeEnabled(ctx context.Context, st planner.ClusterState, target string) bool
	// AwaitDowngradeReady waits until the cluster version and every member's storage version are the step's.
	AwaitDowngradeReady(ctx context.Context, st planner.ClusterState, step planner.Step) error
	// VersionAfterCancel waits, until ctx ends, for the cluster version to rise off target: the version seen
	// last, and whether it rose.
	VersionAfterCancel(ctx context.Context, st planner.ClusterState, target string) (seen string, raised bool)
	// ConfirmLease makes sure the run still holds the lease before a write of its own.
	ConfirmLease(ctx context.Context) error
	// Record posts a Kubernetes Event of reason on the StatefulSet; Say is a line of progress.
	Record(ctx context.Context, reason, message string)
	Say(step planner.Step, format string, args ...any)
}

// Enable validates and enables etcd's downgrade to the step's minor (a StepEnableDowngrade), unless a member
// already reports it enabled (an earlier run), then waits for etcd to lower the cluster version and every
// member's storage version to it.
func Enable(ctx context.Context, eng Engine, st planner.ClusterState, step planner.Step) error {
	target := step.Version
	if !planner.DowngradeEnabledFor(st, target) {
		permit, err := eng.Permit(ctx, gate.PointOfNoReturn, st, step)
		if err != nil {
			return err
		}
		pod, _ := planner.DowngradeMember(st)
		eng.Say(step, "enabling etcd's downgrade to %s through %s (validate ok)", target, pod)
		eng.Enabling(target)
		pod, err = eng.EnableDowngrade(ctx, permit, st, target)
		if err != nil && !eng.ReportsDowngradeEnabled(ctx, st, target) {
			return fmt.Errorf("enabling etcd's downgrade to %s through %s: %w", target, pod, err)
		}
		eng.Record(ctx, ReasonEnabled, fmt.Sprintf("Enabled etcd's downgrade to %s before restarting members on %s", target, target))
	}
	return eng.AwaitDowngradeReady(ctx, st, step)
}

// Settle is what a run that enabled etcd's downgrade to target does with it on its way out: before any member
// restarted it cancels the downgrade, so the cluster goes back to where it was (cluster version up again);
// after one did it leaves the downgrade enabled, because the restarted member needs it. It says where the
// downgrade stands, for the run's error.
func Settle(ctx context.Context, eng Engine, st planner.ClusterState, target string, restarted bool) string {
	if restarted {
		return fmt.Sprintf("etcd's downgrade to %s stays enabled: a member restarted on %s already and needs it (cancelling now would strand it); the next run resumes the downgrade", target, target)
	}
	cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), CallTimeout)
	defer cancel()
	if _, err := eng.CancelDowngrade(cctx, st, target); err != nil {
		return fmt.Sprintf("etcd's downgrade to %s was enabled before any member restarted, and cancelling it failed (%v): cancel it by hand (`etcdctl downgrade cancel`) or run again to go on with it", target, err)
	}
	eng.Record(cctx, ReasonCancelled, fmt.Sprintf("Cancelled etcd's downgrade to %s: the rollout stopped before any member restarted", target))
	eng.Say(planner.Step{Kind: planner.StepEnableDowngrade, Version: target}, "cancelled etcd's downgrade to %s (no member had restarted)", target)
	return fmt.Sprintf("etcd's downgrade to %s was cancelled, since no member had restarted: the cluster version %s", target, afterCancel(cctx, eng, st, target))
}

// afterCancel says what the cluster version is once etcd's leader had a moment to raise it again.
func afterCancel(ctx context.Context, eng Engine, st planner.ClusterState, target string) string {
	seen, raised := eng.VersionAfterCancel(ctx, st, target)
	switch {
	case raised:
		return "is back to " + seen
	case seen == "":
		return "could not be read again"
	}
	return fmt.Sprintf("is still %s; etcd's leader raises it within seconds", seen)
}

// EndLeft ends a run that rolled no minor change and found etcd's downgrade enabled: a run that stopped before
// any member restarted and whose cancel failed left it so, and it holds the cluster version down (at the
// target) for as long as it stays on. The template decides: when it runs the target minor, there is nothing
// to end (its members run it, and etcd's leader ends the job itself); otherwise the downgrade is not wanted
// and is cancelled. clusterVersion is the version seen after the cancel ("" when none was, or nothing was
// cancelled). A run never calls itself complete with the downgrade left on.
func EndLeft(ctx context.Context, eng Engine, st planner.ClusterState) (clusterVersion string, err error) {
	target, wanted := planner.DowngradeTargetOf(st), planner.TemplateMinor(st)
	if target == "" || planner.IsMinor(target, wanted) {
		return "", nil
	}
	if err := eng.ConfirmLease(ctx); err != nil {
		return "", fmt.Errorf("not cancelling etcd's downgrade to %s: %w", target, err)
	}
	pod, err := eng.CancelDowngrade(ctx, st, target)
	if err != nil && !errors.Is(err, ErrNoJob) {
		return "", fmt.Errorf("etcd's downgrade to %s is still enabled (an earlier run left it on; it holds the cluster version at %s) and cancelling it through %s failed: %w; cancel it by hand (`etcdctl downgrade cancel`) or run again",
			target, target, pod, err)
	}
	eng.Say(planner.Step{Kind: planner.StepRelock}, "cancelled etcd's downgrade to %s that an earlier run left enabled (the template runs %s) through %s", target, wanted, pod)
	eng.Record(ctx, ReasonCancelled, fmt.Sprintf("Cancelled etcd's downgrade to %s that an earlier run left enabled: the template runs %s", target, wanted))
	cctx, cancel := context.WithTimeout(ctx, CallTimeout)
	defer cancel()
	seen, _ := eng.VersionAfterCancel(cctx, st, target)
	return seen, nil
}

// EndJob ends etcd's downgrade job once a minor change is rolled. After a downgrade every member runs the
// target, and etcd's leader would end the job itself within seconds; ending it now means an upgrade right after
// cannot start while the job is still on, which would hold the cluster version at the old minor for good (a
// leader on the newer minor ends the job only when every member runs its target). After an upgrade, a job some
// earlier downgrade left on (a member reports it) is what holds the cluster version down: end it.
func EndJob(ctx context.Context, eng Engine, st planner.ClusterState, mv planner.VersionMove) {
	down := mv.To.Major == mv.From.Major && mv.To.Minor < mv.From.Minor
	if !down && planner.DowngradeTargetOf(st) == "" {
		return
	}
	target := mv.To.MajorMinor()
	if !down {
		target = mv.From.MajorMinor()
	}
	pod, err := eng.CancelDowngrade(ctx, st, target)
	switch {
	case err == nil:
		eng.Say(planner.Step{Kind: planner.StepRelock}, "ended etcd's downgrade job through %s (every member runs %s)", pod, mv.To.MajorMinor())
	case errors.Is(err, ErrNoJob):
		// etcd's leader ended it already.
	default:
		eng.Say(planner.Step{Kind: planner.StepRelock}, "could not end etcd's downgrade job through %s (%v): etcd's leader ends it by itself once every member runs %s", pod, err, mv.To.MajorMinor())
	}
}

// CheckMemberVersions is the end of a minor-version change: every member that answers must run the
// template's minor by its own word.
func CheckMemberVersions(st planner.ClusterState, to planner.EtcdVersion) error {
	for _, m := range st.Members {
		if v, ok := planner.ParseVersion(m.ServerVersion); ok && v.MajorMinor() != to.MajorMinor() {
			return fmt.Errorf("%w: every member rolled to etcd %s, but %s reports %s", ErrMemberVersion, to, m.Pod, m.ServerVersion)
		}
	}
	return nil
}
