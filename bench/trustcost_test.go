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
