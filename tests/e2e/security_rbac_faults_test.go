//go:build e2e && faults

package e2e

import (
	"testing"

	"github.com/pulumi/pulumi/sdk/v3/go/auto"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/etcd-rollout/pulumi-etcd-rollout/tests/harness"
)

// The Pulumi side of least privilege: EtcdRollingUpgrade given only a kubeconfig for a ServiceAccount bound to
// deploy/rbac/role.yaml previews (its Check reads the live cluster for the plan) and rolls an mTLS StatefulSet
// that the admin created. tests/faults/rbac_test.go does the same with the CLI and removes verbs one by one.
func TestFaultsRBACShippedRoleThroughPulumi(t *testing.T) {
	p := repoPaths(t)
	c := harness.Connect(t)
	ctx := t.Context()
	ns := c.Namespace(t)
	e := c.MustCreateEtcd(t, ns, mtlsSpec(c))

	g := newGoRunner(t, p, "etcd-rollout-rbac", leakProgram(ns))
	require.NoError(t, g.stack.SetAllConfig(ctx, auto.ConfigMap{
		"kubeconfig":  {Value: tokenKubeconfig(ctx, t, c, ns), Secret: true},
		"versionHash": {Value: "1"},
	}))
	res, err := g.up(ctx, nil)
	require.NoError(t, err, "first up with the shipped Role:\n%s", res.explained())

	rev, err := e.SetTemplateAnnotation(ctx, "example.etcd-rollout/pod-revision", "2")
	require.NoError(t, err)
	pv, err := g.preview(ctx, map[string]string{"versionHash": "2"})
	require.NoError(t, err, "preview with the shipped Role:\n%s", pv.explained())
	steps := pv.rolloutSteps()
	require.Len(t, steps, 1)
	assert.Equal(t, []string{"etcd-2", "etcd-1", "etcd-0"}, rolled(planOf(steps[0])), "the preview shows the plan, read with the Role's permissions")

	res, err = g.up(ctx, map[string]string{"versionHash": "2"})
	require.NoError(t, err, "rolling up with the shipped Role:\n%s", res.explained())
	assert.Equal(t, rev, res.Outputs["updateRevision"])
	assert.Equal(t, []any{"etcd-2", "etcd-1", "etcd-0"}, res.Outputs["membersRolled"])
	assert.EqualValues(t, 0, res.Outputs["unplannedElections"])
	sts, err := e.StatefulSet(ctx)
	require.NoError(t, err)
	assert.EqualValues(t, *sts.Spec.Replicas, *sts.Spec.UpdateStrategy.RollingUpdate.Partition, "locked again")
}
