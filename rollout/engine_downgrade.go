package rollout

import (
	"context"
	"errors"
	"fmt"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/util/retry"

	"github.com/etcd-rollout/pulumi-etcd-rollout/rollout/internal/member"
	"github.com/etcd-rollout/pulumi-etcd-rollout/rollout/internal/planner"
	"github.com/etcd-rollout/pulumi-etcd-rollout/rollout/internal/poll"
)

// ReasonDowngradeEnabled and ReasonDowngradeCancelled are the Events recorded on the StatefulSet when the
// engine enables or cancels etcd's downgrade: cluster-wide changes an operator should find in `kubectl describe`.
const (
	ReasonDowngradeEnabled   = "EtcdDowngradeEnabled"
	ReasonDowngradeCancelled = "EtcdDowngradeCancelled"
)

// downgradeCallTimeout bounds one downgrade API call; enable is a Raft proposal, answered within an election
// timeout or two on a healthy cluster.
const downgradeCallTimeout = 10 * time.Second

// downgradeRun is what this run did with etcd's downgrade API: what an exit must undo or report.
type downgradeRun struct {
	target string
	// restarted is set once a member restarted after the downgrade was enabled: from then on the cluster is
	// mixed (or about to be), and cancelling would strand that member.
	restarted bool
}

// ValidateDowngrade asks etcd whether the cluster can go down to target ("3.5"): `downgrade validate`, sent
// to the leader (else any member that answers). Preview and Check call it, and the engine again right before
// enabling. The error wraps ErrVersionPath: waiting does not change etcd's answer, the template must.
func (e *Engine) ValidateDowngrade(ctx context.Context, st ClusterState, target string) error {
	pod, err := e.downgradeCall(ctx, st, member.DowngradeValidate, target)
	switch {
	case err == nil:
		return nil
	case member.Transient(err):
		return fmt.Errorf("%w: could not ask etcd `downgrade validate %s` (through %s): %v", ErrBlocked, target, pod, err)
	}
	return fmt.Errorf("%w: %w: etcd refused `downgrade validate %s` (asked through %s): %v", ErrBlocked, ErrVersionPath, target, pod, err)
}

// downgradeAttempts is how often a downgrade call that met a broken connection (not an answer from etcd) is
// sent again, each time on a new connection.
const downgradeAttempts = 3

// downgradeCall sends one downgrade API call through downgradeMember, again on a new connection when the
// connection broke (a port-forward that ended, a member that restarted): clientv3 retries reads itself, not
// maintenance calls. It returns the member asked last.
func (e *Engine) downgradeCall(ctx context.Context, st ClusterState, action member.DowngradeAction, target string) (string, error) {
	pod, err := downgradeMember(st)
	if err != nil {
		return "", err
	}
	// A broken connection is forgotten, so the next attempt dials anew; an answer from etcd is final.
	retryable := func(err error) bool { return member.Transient(err) && ctx.Err() == nil }
	err = retry.OnError(wait.Backoff{Steps: downgradeAttempts, Duration: 200 * time.Millisecond}, retryable, func() error {
		cctx, cancel := context.WithTimeout(ctx, downgradeCallTimeout)
		defer cancel()
		_, err := e.etcd.Downgrade(cctx, pod, action, target)
		if err != nil && retryable(err) {
			e.etcd.Forget(pod)
		}
		return err
	})
	return pod, err
}

// downgradeMember is the member the downgrade API is asked through: the leader, which serves enable and cancel
// without forwarding, else the first member that answers.
func downgradeMember(st ClusterState) (string, error) {
	for _, m := range st.Members {
		if m.IsLeader && m.Reachable {
			return m.Pod, nil
		}
	}
	for _, m := range st.Members {
		if m.Reachable {
			return m.Pod, nil
		}
	}
	return "", fmt.Errorf("%w: no member answers, so etcd's downgrade API cannot be asked", ErrBlocked)
}

// reportsDowngradeEnabled asks the members whether etcd's downgrade to target is enabled: an enable whose
// answer was lost (or that a retry found already done) may well have taken effect.
func (e *Engine) reportsDowngradeEnabled(ctx context.Context, st ClusterState, target string) bool {
	for _, m := range st.Members {
		cctx, cancel := context.WithTimeout(ctx, memberCallTimeout)
		s, err := e.etcd.Status(cctx, m.Pod)
		cancel()
		if err == nil && isMinor(s.DowngradeTarget, target) {
			return true
		}
	}
	return false
}

// isMinor says version ("3.5.0") is of minor ("3.5").
func isMinor(version, minor string) bool {
	v, ok := planner.ParseVersion(version)
	return ok && v.MajorMinor() == minor
}

// downgradeEnabledFor says a member reports etcd's downgrade enabled for target.
func downgradeEnabledFor(st ClusterState, target string) bool {
	for _, m := range st.Members {
		if isMinor(m.DowngradeTarget, target) {
			return true
		}
	}
	return false
}

// awaitDowngradeReady waits, for up to the health timeout, until the cluster version is the step's minor and
// no member reports a newer storage version: the moment a member may restart on the older binary.
func (e *Engine) awaitDowngradeReady(ctx context.Context, st ClusterState, step Step) error {
	start := time.Now()
	last, err := poll.Until(ctx, start.Add(e.cfg.HealthTimeout), poll.Every(e.pollEvery), func(ctx context.Context) (string, bool, error) {
		seen, ok := e.downgradeReady(ctx, st, step.Version)
		return seen, ok, nil
	})
	switch {
	case errors.Is(err, poll.ErrWaitedOut):
		return fmt.Errorf("etcd's downgrade to %s is enabled, but after %s (the health timeout) %s", step.Version, e.cfg.HealthTimeout, last)
	case err != nil:
		return fmt.Errorf("waiting for the cluster version to reach %s (last seen: %s): %w", step.Version, last, err)
	}
	e.announce(Event{Kind: EventDowngradeReady, Step: step}, "cluster version and every member's storage version are %s (%s after enabling)",
		step.Version, time.Since(start).Round(100*time.Millisecond))
	return nil
}

// downgradeReady reads the cluster version and each member's storage version; seen says what is not there yet.
func (e *Engine) downgradeReady(ctx context.Context, st ClusterState, target string) (seen string, ok bool) {
	cctx, cancel := context.WithTimeout(ctx, memberCallTimeout)
	defer cancel()
	if cluster := e.freshClusterVersion(cctx, st); !isMinor(cluster, target) {
		return fmt.Sprintf("the cluster version is %q", cluster), false
	}
	for _, m := range st.Members {
		s, err := e.etcd.Status(cctx, m.Pod)
		if err != nil {
			return fmt.Sprintf("%s: %v", m.Pod, err), false
		}
		if v, ok := planner.ParseVersion(s.StorageVersion); ok && v.MajorMinor() != target {
			return fmt.Sprintf("%s reports storage version %s", m.Pod, s.StorageVersion), false
		}
	}
	return "", true
}

// clusterVersionAfterCancel says what the cluster version is once etcd's leader had a moment to raise it
// again after a cancel (versionAfterCancel).
func (e *Engine) clusterVersionAfterCancel(ctx context.Context, st ClusterState, target string) string {
	seen, raised := e.versionAfterCancel(ctx, st, target)
	switch {
	case raised:
		return "is back to " + seen
	case seen == "":
		return "could not be read again"
	}
	return fmt.Sprintf("is still %s; etcd's leader raises it within seconds", seen)
}

// versionAfterCancel waits, until ctx ends, for etcd's leader to raise the cluster version off target after
// a cancel (it re-decides every few seconds). It returns the version seen last ("" when none was) and
// whether it moved.
func (e *Engine) versionAfterCancel(ctx context.Context, st ClusterState, target string) (seen string, raised bool) {
	seen, err := poll.Until(ctx, time.Time{}, poll.Every(e.pollEvery), func(ctx context.Context) (string, bool, error) {
		if now := e.freshClusterVersion(ctx, st); now != "" {
			seen = now
			return seen, !isMinor(now, target), nil
		}
		return seen, false, nil
	})
	return seen, err == nil
}

// errMemberVersion is returned when a finished downgrade or upgrade finds a member whose own version is
// not the template's minor: the image tag said one version and the binary is another.
var errMemberVersion = errors.New("a member runs another version than the template's image tag says")

// endDowngradeJob ends etcd's downgrade job once a minor change is rolled. After a downgrade every member runs
// the target, and etcd's leader would end the job itself within seconds; ending it now means an upgrade right
// after cannot start while the job is still on, which would hold the cluster version at the old minor for
// good (a leader on the newer minor ends the job only when every member runs its target). After an upgrade, a
// job some earlier downgrade left on (a member reports it) is what holds the cluster version down: end it.
func (e *Engine) endDowngradeJob(ctx context.Context, st ClusterState, mv VersionMove) {
	down := mv.To.Major == mv.From.Major && mv.To.Minor < mv.From.Minor
	if !down && downgradeTargetOf(st) == "" {
		return
	}
	target := mv.To.MajorMinor()
	if !down {
		target = mv.From.MajorMinor()
	}
	pod, err := e.downgradeCall(ctx, st, member.DowngradeCancel, target)
	switch {
	case err == nil:
		e.emit(Step{Kind: StepRelock}, "ended etcd's downgrade job through %s (every member runs %s)", pod, mv.To.MajorMinor())
	case errors.Is(err, member.ErrNoDowngradeJob):
		// etcd's leader ended it already.
	default:
		e.emit(Step{Kind: StepRelock}, "could not end etcd's downgrade job through %s (%v): etcd's leader ends it by itself once every member runs %s", pod, err, mv.To.MajorMinor())
	}
}

// downgradeTargetOf is the downgrade target a member reports ("3.5.0"); "" when none does.
func downgradeTargetOf(st ClusterState) string {
	for _, m := range st.Members {
		if m.DowngradeTarget != "" {
			return m.DowngradeTarget
		}
	}
	return ""
}

// templateMinor is the minor ("3.6") the template runs (templateVersion); "" when that cannot be told.
func templateMinor(st ClusterState) string {
	if v, ok := planner.TemplateVersion(st); ok {
		return v.MajorMinor()
	}
	return ""
}

// checkMemberVersions is the end of a minor-version change: every member that answers must run the
// template's minor by its own word.
func checkMemberVersions(st ClusterState, to EtcdVersion) error {
	for _, m := range st.Members {
		if v, ok := planner.ParseVersion(m.ServerVersion); ok && v.MajorMinor() != to.MajorMinor() {
			return fmt.Errorf("%w: every member rolled to etcd %s, but %s reports %s", errMemberVersion, to, m.Pod, m.ServerVersion)
		}
	}
	return nil
}
