package main

import (
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"

	"github.com/etcd-rollout/pulumi-etcd-rollout/rollout"
)

// The trust checks' cost is reported per member rolled, for the cells that made any, and not at all without.
func TestTrustCostsPerMember(t *testing.T) {
	meta := &Meta{Scenarios: []ScenarioMeta{{Name: "easy"}, {Name: "mtls-peerca"}}, Strategies: []StrategyMeta{{Name: "default"}, {Name: "engine"}}}
	engine := &Cell{}
	engine.addTrustCost(rollout.Result{MembersRolled: []string{"etcd-2", "etcd-1", "etcd-0"},
		TrustChecks: rollout.TrustCheckCost{Checks: 7, Probes: 24, APIRequests: 9, Duration: 300 * time.Millisecond}})
	engine.addTrustCost(rollout.Result{MembersRolled: []string{"etcd-2"}}) // no TLS: no check, nothing added
	cells := map[string]map[string]*Cell{"easy": {"default": {}, "engine": {}}, "mtls-peerca": {"default": {}, "engine": engine}}

	var b strings.Builder
	trustCosts(&b, meta, cells)
	assert.Equal(t, "\nThe TLS trust checks before restarts (issue 33: the new peer leaf presented to every other member's peer port, "+
		"the client ports' certificates read), per member rolled, mean: ports probed / time / API requests (port-forwards opened, "+
		"Secrets read): mtls-peerca/engine 8.0 / 100 ms (max 100) / 3.0;\n", b.String())

	b.Reset()
	trustCosts(&b, meta, map[string]map[string]*Cell{"easy": {"engine": {}}})
	assert.Empty(t, b.String(), "no line without a TLS scenario")
}

// The snapshot step of each rollout that took one is reported with its share of the roll, and a ten-cluster
// cell's peak memory next to ten-clusters'.
func TestSnapshotStepsPerClusterRollout(t *testing.T) {
	meta := &Meta{Scenarios: []ScenarioMeta{{Name: "ten-clusters", Clusters: 10}, {Name: "ten-minor", Clusters: 10}},
		Strategies: []StrategyMeta{{Name: "engine"}}}
	start := time.Date(2026, 12, 5, 12, 0, 0, 0, time.UTC)
	minor := &Cell{AnonRSSMB: 74}
	for _, took := range []time.Duration{2 * time.Second, 3 * time.Second} {
		minor.addSnapshotStep(rollout.Result{StartedAt: start, FinishedAt: start.Add(20 * time.Second), Snapshot: &rollout.SnapshotRecord{}},
			[]TimedEvent{{Kind: rollout.EventSnapshotStored, Elapsed: took}, {Kind: rollout.EventMemberRolled, Elapsed: time.Second}})
	}
	minor.SnapshotMB = []float64{2.1, 2.1}
	cells := map[string]map[string]*Cell{"ten-clusters": {"engine": {AnonRSSMB: 70}}, "ten-minor": {"engine": minor}}

	var b strings.Builder
	snapshotSteps(&b, meta, cells)
	assert.Equal(t, "\nSnapshots before a point of no return (issue 34: from the leader through the port-forward, checked, stored, "+
		"read back), per cluster rollout: ten-minor/engine 2 snapshots of 2.1 MB: 2.50 s each (max 3.00), 12 % of the cluster's roll; "+
		"peak RSS 74 MB anonymous vs 70 MB for ten-clusters;\n", b.String())
}
