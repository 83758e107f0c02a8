//go:build integration

package engine_test

import (
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/etcd-rollout/pulumi-etcd-rollout/rollout"
	"github.com/etcd-rollout/pulumi-etcd-rollout/tests/harness"
)

// A whole 3.5 → 3.6 upgrade: a verified snapshot of the 3.5 cluster stored before the first step, every
// member rolled onto the 3.6 binary with no election, the run waits for etcd to move the cluster version once
// the last member runs 3.6 and reports it, and it counts the API requests it made.
func TestMinorUpgradeReportsTheClusterVersion(t *testing.T) {
	spec := httpSpec
	spec.Version = "3.5"
	f := newFixture(t, spec)
	ctx := runCtx(t)
	putKeys(ctx, t, f.etcd, 200)
	written, err := f.client().Put(ctx, "/upgrade/last", "acknowledged")
	require.NoError(t, err)
	before := f.must.Term()
	rev := f.must.ChangeVersion("3.6", harness.StartFaults{})

	var said []string
	var kinds []rollout.EventKind
	res, err := f.engine(func(cfg *rollout.Config, o *rollout.Options) {
		log := o.OnEvent
		o.OnEvent = func(ev rollout.Event) {
			log(ev)
			said = append(said, ev.Message)
			kinds = append(kinds, ev.Kind)
		}
	}).Run(ctx)
	require.NoError(t, err)
	t.Logf("%s", res.Summary())
	revs, _ := f.must.Pods()
	assert.Equal(t, []string{rev, rev, rev}, revs)
	assert.Regexp(t, `^3\.6\.`, res.ClusterVersion, "the cluster version moved to 3.6")
	assert.Contains(t, strings.Join(said, "\n"), "cluster version is "+res.ClusterVersion+" (", "said so")
	assert.Equal(t, before+uint64(res.LeaderTransfers), f.must.Term(), "raft term rose only by the transfers")
	assert.Positive(t, res.APIRequests)

	require.NotNil(t, res.Snapshot, "a snapshot before the point of no return")
	assert.Less(t, slices.Index(kinds, rollout.EventSnapshotStored), slices.Index(kinds, rollout.EventMemberRestarting), "stored before the first restart")
	assert.GreaterOrEqual(t, res.Snapshot.Revision, written.Header.Revision, "it holds the last acknowledged write")
	assert.Empty(t, res.Snapshot.StorageVersion, "a 3.5 cluster's data: no storage version recorded")
	assert.Regexp(t, `^3\.5\.`, res.Snapshot.EtcdVersion)
	assert.FileExists(t, strings.TrimPrefix(res.Snapshot.Location, "file://"))
}
