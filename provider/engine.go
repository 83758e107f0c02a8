package provider

import (
	"context"

	appsv1 "k8s.io/api/apps/v1"
	"k8s.io/client-go/rest"

	"github.com/etcd-rollout/pulumi-etcd-rollout/rollout"
)

// Engine is the part of rollout.Engine the provider drives. It is an interface so that the resource's logic
// (check, diff, partial state, logging) is unit-tested against a fake, and real clusters are left to the
// end-to-end tests.
type Engine interface {
	// Observe reads the StatefulSet and every member once, without changing anything.
	Observe(ctx context.Context) (rollout.ClusterState, error)
	// ValidateDowngrade asks etcd whether the cluster can go down to target ("3.5"): `downgrade validate`,
	// which changes nothing.
	ValidateDowngrade(ctx context.Context, st rollout.ClusterState, target string) error
	// CheckTrust refuses (rollout.ErrPeerTrust, rollout.ErrClientTrust) restarting the members of ordinals onto
	// the template's TLS material when their peers or their clients, as they run now, would not talk to them.
	CheckTrust(ctx context.Context, st rollout.ClusterState, ordinals []int) error
	// Run rolls every outdated member and re-locks the partition. It returns what it did even on error.
	Run(ctx context.Context) (rollout.Result, error)
	// Close releases the engine's connections (port-forwards, etcd clients).
	Close() error
}

// EngineFactory builds an Engine for one rollout on the cluster cfg points at. onEvent receives one call per
// engine step; it must not block.
type EngineFactory func(cfg rollout.Config, restConfig *rest.Config, onEvent func(rollout.Event)) (Engine, error)

// Planner turns an observation into steps. In production it is rollout.PlanRollout; it is a field so tests can
// feed plans without building cluster states that satisfy every planner rule.
type Planner func(s rollout.ClusterState, policy rollout.LeaderPolicy) (rollout.Plan, error)

// UIDLookup returns the UID of the StatefulSet, so Diff can refuse a cluster that is not the one the rollout
// was first run on without paying for a full member observation.
type UIDLookup func(ctx context.Context, restConfig *rest.Config, namespace, name string) (string, error)

// FactsReader reads what Check validates the inputs against (the StatefulSet, whether its namespace exists,
// who holds the rollout Lease), without contacting a member. A nil reader skips those checks.
type FactsReader func(ctx context.Context, restConfig *rest.Config, namespace, name string) (clusterFacts, error)

// LiveStatefulSetReader reads the StatefulSet as it stands on the cluster that access reaches; nil and no
// error when there is none yet.
type LiveStatefulSetReader func(ctx context.Context, access ClusterAccess, namespace, name string) (*appsv1.StatefulSet, error)

// Deps are the provider's connections to the outside world. Production code uses DefaultDeps.
type Deps struct {
	NewEngine  EngineFactory
	Plan       Planner
	LookupUID  UIDLookup
	RestConfig RestConfigResolver
	ReadFacts  FactsReader
	// ReadLive is what the component compares a StatefulSet it owns with before it applies it (locked
	// fields); nil skips the comparison.
	ReadLive LiveStatefulSetReader
}

// RestConfigResolver turns the resource's cluster-access inputs into a client-go config.
type RestConfigResolver func(access ClusterAccess) (*rest.Config, error)
