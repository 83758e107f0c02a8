//go:build e2e

package e2e

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/etcd-rollout/pulumi-etcd-rollout/examples/go/etcdprogram"
	"github.com/etcd-rollout/pulumi-etcd-rollout/tests/harness"
)

// rolloutState is the part of the Rollout's state that `pulumi refresh` records.
type rolloutState struct {
	Complete       bool     `json:"complete"`
	Plan           []string `json:"plan"`
	UpdateRevision string   `json:"updateRevision"`
	MembersRolled  []string `json:"membersRolled"`
	FinishedAt     string   `json:"finishedAt"`
}

// TestRefreshRecordsLiveState: after someone changes the StatefulSet behind Pulumi's back, `pulumi refresh`
// records it in the Rollout's state (members not at updateRevision, then a partition lowered by hand) and
// writes nothing to the cluster: the partition and every pod stay as they were.
func TestRefreshRecordsLiveState(t *testing.T) {
	p := repoPaths(t)
	c := harness.Connect(t)
	ctx := t.Context()
	ns := c.Namespace(t)
	dir := t.TempDir()
	r := newGoRunner(t, p, "etcd-rollout-refresh", etcdprogram.Program)
	config := map[string]string{"kubeconfig": c.Kubeconfig, "namespace": ns, "createNamespace": "false",
		"stsName": "etcd", "manifestFile": renderManifest(t, c, dir, false, "1")}
	res, err := r.up(ctx, config)
	require.NoError(t, err, "up:\n%s", res.explained())
	first := viewStatefulSet(ctx, t, c, ns)
	requireRolledAndLocked(t, first)

	st := refreshedRollout(ctx, t, r)
	assert.True(t, st.Complete, "nothing changed: complete")
	assert.Empty(t, st.Plan)
	assert.Equal(t, first.UpdateRevision, st.UpdateRevision)
	finishedAt := st.FinishedAt

	// Someone applies a new pod template by hand: the partition is locked, so no member restarts.
	patchStatefulSet(ctx, t, c, ns, `{"spec":{"template":{"metadata":{"annotations":{"e2e/hand-applied":"yes"}}}}}`)
	changed := waitUpdateRevision(ctx, t, c, ns, first.UpdateRevision)
	uids := podUIDsOf(ctx, t, c, ns, "etcd")

	st = refreshedRollout(ctx, t, r)
	assert.False(t, st.Complete, "members not at updateRevision: not complete")
	assert.Equal(t, changed, st.UpdateRevision, "the live updateRevision is recorded")
	assert.Equal(t, []string{"etcd-2", "etcd-1", "etcd-0"}, rolled(st.Plan), "plan: %q", st.Plan)
	assert.Equal(t, finishedAt, st.FinishedAt, "the last run's history is kept")
	after := viewStatefulSet(ctx, t, c, ns)
	assert.Equal(t, after.Replicas, after.Partition, "refresh wrote nothing: still locked")
	assert.Equal(t, uids, podUIDsOf(ctx, t, c, ns, "etcd"), "refresh restarted nothing")

	// The next preview shows the plan the refresh recorded.
	pv, err := r.preview(ctx, config)
	require.NoError(t, err, "preview:\n%s", pv.explained())
	steps := pv.rolloutSteps()
	require.Len(t, steps, 1)
	assert.Equal(t, "update", string(steps[0].Op))
	assert.Contains(t, pv.Text, "roll etcd-2")

	// Someone lowers the partition by hand (the controller then restarts etcd-2 on its own).
	patchStatefulSet(ctx, t, c, ns, `{"spec":{"updateStrategy":{"rollingUpdate":{"partition":2}}}}`)
	st = refreshedRollout(ctx, t, r)
	assert.False(t, st.Complete)
	require.NotEmpty(t, st.Plan)
	assert.Equal(t, "lock partition at 3", st.Plan[0], "plan: %q", st.Plan)
	assert.Equal(t, 2, viewStatefulSet(ctx, t, c, ns).Partition, "refresh wrote nothing: the partition is still 2")

	// Someone deletes the StatefulSet: the refresh drops the Rollout from the state, as pulumi-kubernetes drops
	// the StatefulSet itself.
	require.NoError(t, c.Kube.AppsV1().StatefulSets(ns).Delete(ctx, "etcd", metav1.DeleteOptions{}))
	_, found := refreshed(ctx, t, r)
	assert.False(t, found, "a Rollout whose StatefulSet is gone is dropped by refresh")
	require.NoError(t, r.destroy(ctx))
}

// refreshedRollout runs `pulumi refresh` and returns the Rollout's state from the stack's checkpoint.
func refreshedRollout(ctx context.Context, t *testing.T, r runner) rolloutState {
	t.Helper()
	st, found := refreshed(ctx, t, r)
	require.True(t, found, "no Rollout in the stack after refresh")
	return st
}

// refreshed runs `pulumi refresh` and returns the Rollout's state, and whether the stack still has one.
func refreshed(ctx context.Context, t *testing.T, r runner) (rolloutState, bool) {
	t.Helper()
	g, ok := r.(*goRunner)
	require.True(t, ok, "the refresh test drives the Go example")
	_, err := g.stack.Refresh(ctx)
	require.NoError(t, err, "pulumi refresh")
	dep, err := g.stack.Export(ctx)
	require.NoError(t, err)
	var checkpoint struct {
		Resources []struct {
			Type    string          `json:"type"`
			Outputs json.RawMessage `json:"outputs"`
		} `json:"resources"`
	}
	require.NoError(t, json.Unmarshal(dep.Deployment, &checkpoint))
	for _, res := range checkpoint.Resources {
		if res.Type == "etcd-rollout:index:Rollout" {
			var st rolloutState
			require.NoError(t, json.Unmarshal(res.Outputs, &st))
			return st, true
		}
	}
	return rolloutState{}, false
}

func patchStatefulSet(ctx context.Context, t *testing.T, c *harness.Cluster, ns, patch string) {
	t.Helper()
	_, err := c.Kube.AppsV1().StatefulSets(ns).Patch(ctx, "etcd", types.StrategicMergePatchType, []byte(patch), metav1.PatchOptions{})
	require.NoError(t, err)
}

func waitUpdateRevision(ctx context.Context, t *testing.T, c *harness.Cluster, ns, old string) string {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		if v := viewStatefulSet(ctx, t, c, ns); v.UpdateRevision != "" && v.UpdateRevision != old {
			return v.UpdateRevision
		}
		time.Sleep(200 * time.Millisecond)
	}
	t.Fatalf("the StatefulSet's updateRevision did not move from %s", old)
	return ""
}
