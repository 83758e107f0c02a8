//go:build e2e && faults

package e2e

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/etcd-rollout/pulumi-etcd-rollout/tests/harness"
)

// examples/yaml-onemember through the plain pulumi CLI (issue 34): a template change of a one-member etcd is
// refused by `pulumi preview` and by `pulumi up` while acceptWriteOutage is false, with no pod restarted; with
// it, `pulumi up` stores a verified snapshot, restarts the only member and reports the measured write outage
// and the restart's own election in the stack's outputs, 0 unplanned, every key written before still there.
func TestFaultsOneMemberExampleThroughPulumiUp(t *testing.T) {
	p := repoPaths(t)
	c := harness.Connect(t)
	ctx := t.Context()
	cli, e, ns := upYAMLExample(t, p, c, "yaml-onemember", nil, harness.EtcdSpec{Replicas: 1})
	etcd, err := e.Client(ctx)
	require.NoError(t, err)
	defer etcd.Close()
	for _, k := range []string{"before/1", "before/2", "before/3"} {
		_, err := etcd.Put(ctx, k, "v")
		require.NoError(t, err)
	}
	term := e.Must(t).Term()
	_, uids := e.Must(t).Pods()

	cli.run(t, "config", "set", "podRevision", "2")
	preview := cli.fails(t, "preview", "--diff")
	assert.Contains(t, preview, "acceptWriteOutage", "the preview names the consent")
	assert.Contains(t, preview, "etcd-0 is the only member")
	up := cli.fails(t, "up", "--yes")
	assert.Contains(t, up, "acceptWriteOutage")
	_, uidsAfter := e.Must(t).Pods()
	assert.Equal(t, uids, uidsAfter, "no pod restarted")
	assert.Equal(t, term, e.Must(t).Term())

	cli.run(t, "config", "set", "acceptWriteOutage", "true")
	preview = cli.run(t, "preview", "--diff")
	assert.Contains(t, preview, "a verified snapshot of the leader before etcd-0 restarts")
	assert.Contains(t, preview, "roll etcd-0: the only member")
	out := cli.run(t, "up", "--yes", "--skip-preview")
	t.Logf("the consented pulumi up:\n%s", tail(out, 15))
	requireRolledAndLocked(t, viewStatefulSet(ctx, t, c, ns))
	require.NoError(t, e.WaitHealthy(ctx))

	var outputs map[string]any
	require.NoError(t, json.Unmarshal([]byte(cli.run(t, "stack", "output", "--json")), &outputs))
	assert.EqualValues(t, 0, outputs["unplannedElections"], "the restart's own election is not unplanned")
	outage, ok := outputs["writeOutage"].(map[string]any)
	require.True(t, ok, "writeOutage output %v", outputs["writeOutage"])
	assert.Equal(t, "etcd-0", outage["pod"])
	assert.Equal(t, true, outage["back"])
	assert.Greater(t, outage["seconds"], 0.0)
	assert.EqualValues(t, 1, outage["elections"])
	assert.Equal(t, term+1, e.Must(t).Term(), "one election: the restart's own")
	snap, ok := outputs["snapshot"].(map[string]any)
	require.True(t, ok, "snapshot output %v", outputs["snapshot"])
	assert.Equal(t, "etcd-0", snap["member"])
	got, err := etcd.Get(ctx, "before/", clientv3.WithPrefix(), clientv3.WithCountOnly())
	require.NoError(t, err)
	assert.EqualValues(t, 3, got.Count, "every key written before the restart is still there")
	cli.run(t, "destroy", "--yes", "--skip-preview")
}
