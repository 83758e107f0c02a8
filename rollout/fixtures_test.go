package rollout

import "github.com/etcd-rollout/pulumi-etcd-rollout/rollout/internal/planner/plannertest"

// The states the planner's tests start from, under the names this package's tests use.
const (
	oldRev = plannertest.OldRev
	newRev = plannertest.NewRev
)

func healthyState(n, leader int, updated ...int) ClusterState {
	return plannertest.HealthyState(n, leader, updated...)
}
