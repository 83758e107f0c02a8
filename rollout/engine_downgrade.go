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
	"github.com/etcd-rollout/pulumi-etcd-rollout/rollout/internal/procedure/versionchange"
)

// ReasonDowngradeEnabled and ReasonDowngradeCancelled are the Events recorded on the StatefulSet when the
// engine enables or cancels etcd's downgrade (internal/procedure/versionchange).
const (
	ReasonDowngradeEnabled   = versionchange.ReasonEnabled
	ReasonDowngradeCancelled = versionchange.ReasonCancelled
)

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
	pod, err := planner.DowngradeMember(st)
	if err != nil {
		return "", err
	}
	// A broken connection is forgotten, so the next attempt dials anew; an answer from etcd is final.
	retryable := func(err error) bool { return member.Transient(err) && ctx.Err() == nil }
	err = retry.OnError(wait.Backoff{Steps: downgradeAttempts, Duration: 200 * time.Millisecond}, retryable, func() error {
		cctx, cancel := context.WithTimeout(ctx, versionchange.CallTimeout)
		defer cancel()
		_, err := e.etcd.Downgrade(cctx, pod, action, target)
		if err != nil && retryable(err) {
			e.etcd.Forget(pod)
		}
		return err
	})
	return pod, err
}

// reportsDowngradeEnabled asks the members whether etcd's downgrade to target is enabled: an enable whose
// answer was lost (or that a retry found already done) may well have taken effect.
func (e *Engine) reportsDowngradeEnabled(ctx context.Context, st ClusterState, target string) bool {
	for _, m := range st.Members {
		cctx, cancel := context.WithTimeout(ctx, memberCallTimeout)
		s, err := e.etcd.Status(cctx, m.Pod)
		cancel()
		if err == nil && planner.IsMinor(s.DowngradeTarget, target) {
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
	if cluster := e.freshClusterVersion(cctx, st); !planner.IsMinor(cluster, target) {
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

// versionAfterCancel waits, until ctx ends, for etcd's leader to raise the cluster version off target after
// a cancel (it re-decides every few seconds). It returns the version seen last ("" when none was) and
// whether it moved.
func (e *Engine) versionAfterCancel(ctx context.Context, st ClusterState, target string) (seen string, raised bool) {
	seen, err := poll.Until(ctx, time.Time{}, poll.Every(e.pollEvery), func(ctx context.Context) (string, bool, error) {
		if now := e.freshClusterVersion(ctx, st); now != "" {
			seen = now
			return seen, !planner.IsMinor(now, target), nil
		}
		return seen, false, nil
	})
	return seen, err == nil
}
