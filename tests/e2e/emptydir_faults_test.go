//go:build e2e && faults

package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/anishathalye/porcupine"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/etcd-rollout/pulumi-etcd-rollout/tests/harness"
)

// examples/yaml-emptydir through the plain pulumi CLI, as its users run it (issue 32, item 5): the members'
// data dies with their pod, so a template change replaces every member. The `pulumi up` of a template change
// is SIGKILLed while etcd-2 is a learner (mid-replacement: removed, its pod gone, added back, not yet
// promoted); after `pulumi cancel`, the next `pulumi up` finishes etcd-2's replacement and replaces the rest:
// every member under a new ID, no learner left, 0 unplanned elections, the raft term up only by the reported
// transfers, every key written before still there, and the background client's history linearizable.
func TestFaultsEmptyDirExampleThroughPulumiUp(t *testing.T) {
	p := repoPaths(t)
	c := harness.Connect(t)
	ctx := t.Context()
	cli, e, ns := upYAMLExample(t, p, c, "yaml-emptydir", map[string]string{"cooldownSeconds": "1"}, harness.EtcdSpec{Replicas: 3, DataDiesWithPod: true})
	etcd, err := e.Client(ctx)
	require.NoError(t, err)
	defer etcd.Close()
	for i := range 100 {
		_, err := etcd.Put(ctx, fmt.Sprintf("before/%03d", i), "v")
		require.NoError(t, err)
	}
	idsBefore := memberList(ctx, t, etcd)
	e.Must(t).PlaceLeader(0) // the kill lands on etcd-2's replacement: no transfer of the killed run to count
	term := e.Must(t).Term()
	rec := harness.StartRecorder(ctx, etcd, harness.RecorderOptions{})

	cli.run(t, "config", "set", "podRevision", "2")
	preview := cli.run(t, "preview", "--diff")
	assert.Contains(t, preview, "replace etcd-2: its data dies with its pod, so it is removed, added back as a learner", "the preview says the members are replaced")

	up := cli.start(t, "up", "--yes", "--skip-preview")
	learner := waitForLearner(ctx, t, etcd, up)
	require.NoError(t, up.kill())
	t.Logf("killed pulumi up while %s was a learner", learner)
	cli.run(t, "cancel", "--yes")
	out := cli.run(t, "up", "--yes", "--skip-preview")
	t.Logf("the pulumi up after the kill:\n%s", tail(out, 25))

	requireRolledAndLocked(t, viewStatefulSet(ctx, t, c, ns))
	require.NoError(t, e.WaitHealthy(ctx), "every member healthy")
	var outputs map[string]any
	require.NoError(t, json.Unmarshal([]byte(cli.run(t, "stack", "output", "--json")), &outputs))
	assert.EqualValues(t, 0, outputs["unplannedElections"])
	transfers, ok := outputs["leaderTransfers"].(float64)
	require.True(t, ok, "leaderTransfers output %v", outputs["leaderTransfers"])
	assert.Equal(t, term+uint64(transfers), e.Must(t).Term(), "the raft term rose by the %v transfers only", transfers)
	idsAfter := memberList(ctx, t, etcd)
	require.Len(t, idsAfter, 3)
	for url, m := range idsAfter {
		assert.False(t, m.IsLearner, "%s votes", url)
		assert.NotEqual(t, idsBefore[url].ID, m.ID, "the member at %s has a new ID", url)
	}
	got, err := etcd.Get(ctx, "before/", clientv3.WithPrefix(), clientv3.WithCountOnly())
	require.NoError(t, err)
	assert.EqualValues(t, 100, got.Count, "every key written before the roll is still there")
	ops := rec.Stop()
	check := harness.CheckLinearizable(ops, 2*time.Minute)
	t.Logf("background client: %s; %s", harness.SummarizeHistory(ops), check.Result)
	assert.Equal(t, porcupine.Ok, check.Result, "no acknowledged write lost, no stale read")
	cli.run(t, "destroy", "--yes", "--skip-preview")
}

// waitForLearner waits until etcd lists a learner (a replacement between its add and its promote) and returns
// its peer URL; it fails the test if up ends first.
func waitForLearner(ctx context.Context, t *testing.T, etcd *clientv3.Client, up *driverProc) string {
	t.Helper()
	deadline := time.Now().Add(5 * time.Minute)
	for time.Now().Before(deadline) {
		select {
		case err := <-up.done:
			t.Fatalf("pulumi up ended (%v) before any member was a learner:\n%s%s", err, up.stdout.String(), up.stderr.String())
		case <-time.After(100 * time.Millisecond):
		}
		for url, m := range memberList(ctx, t, etcd) {
			if m.IsLearner {
				return url
			}
		}
	}
	_ = up.kill()
	t.Fatal("no member became a learner within 5 minutes")
	return ""
}

// listedMember is one entry of etcd's member list.
type listedMember struct {
	ID        uint64
	IsLearner bool
}

// memberList is etcd's member list by peer URL.
func memberList(ctx context.Context, t *testing.T, etcd *clientv3.Client) map[string]listedMember {
	t.Helper()
	cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	list, err := etcd.MemberList(cctx)
	require.NoError(t, err)
	out := map[string]listedMember{}
	for _, m := range list.Members {
		for _, url := range m.PeerURLs {
			out[url] = listedMember{ID: m.ID, IsLearner: m.IsLearner}
		}
	}
	return out
}
