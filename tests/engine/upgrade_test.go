//go:build integration

package engine_test

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/etcd-rollout/pulumi-etcd-rollout/rollout"
	"github.com/etcd-rollout/pulumi-etcd-rollout/tests/harness"
)

// A whole 3.5 → 3.6 upgrade: every member rolled onto the 3.6 binary with no election, the run waits for
// etcd to move the cluster version once the last member runs 3.6 and reports it, and it counts the API
// requests it made.
func TestMinorUpgradeReportsTheClusterVersion(t *testing.T) {
	spec := httpSpec
	spec.Version = "3.5"
	f := newFixture(t, spec)
	before := f.must.Term()
	rev := f.must.ChangeVersion("3.6", harness.StartFaults{})

	var said []string
	res, err := f.engine(func(cfg *rollout.Config, o *rollout.Options) {
		log := o.OnEvent
		o.OnEvent = func(ev rollout.Event) {
			log(ev)
			said = append(said, ev.Message)
		}
	}).Run(runCtx(t))
	require.NoError(t, err)
	t.Logf("%s", res.Summary())
	revs, _ := f.must.Pods()
	assert.Equal(t, []string{rev, rev, rev}, revs)
	assert.Regexp(t, `^3\.6\.`, res.ClusterVersion, "the cluster version moved to 3.6")
	assert.Contains(t, strings.Join(said, "\n"), "cluster version is "+res.ClusterVersion+" (", "said so")
	assert.Equal(t, before+uint64(res.LeaderTransfers), f.must.Term(), "raft term rose only by the transfers")
	assert.Positive(t, res.APIRequests)
}
