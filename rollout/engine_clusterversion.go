package rollout

import (
	"context"
	"time"

	"github.com/etcd-rollout/pulumi-etcd-rollout/rollout/internal/planner"
	"github.com/etcd-rollout/pulumi-etcd-rollout/rollout/internal/poll"
)

// awaitClusterVersion waits, after the last member of a minor-version change, for etcd to move the cluster
// version to the target's minor (the leader decides it every few seconds once every member runs the new
// version), for up to the health timeout, and returns the cluster version it last saw. A cluster version
// that does not move is reported, not failed: every member is on the new revision and healthy, and etcd
// moves it on its own; the operator is told what it still is.
func (e *Engine) awaitClusterVersion(ctx context.Context, st ClusterState, to EtcdVersion) string {
	start, seen, first := time.Now(), st.ClusterVersion, true
	seen, err := poll.Until(ctx, start.Add(e.cfg.HealthTimeout), poll.Every(e.pollEvery), func(ctx context.Context) (string, bool, error) {
		if !first { // the first look is at the version the last observation read
			if now := e.freshClusterVersion(ctx, st); now != "" {
				seen = now
			}
		}
		first = false
		v, ok := planner.ParseVersion(seen)
		return seen, ok && v.Major == to.Major && v.Minor == to.Minor, nil
	})
	if err != nil {
		e.emit(Step{Kind: StepRelock}, "cluster version is still %q, not yet %d.%d: etcd moves it once its leader has seen every member run %d.%d", seen, to.Major, to.Minor, to.Major, to.Minor)
		return seen
	}
	e.emit(Step{Kind: StepRelock}, "cluster version is %s (%s after the last member)", seen, time.Since(start).Round(100*time.Millisecond))
	return seen
}
