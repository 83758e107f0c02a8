//go:build faults

package faults

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/etcd-rollout/pulumi-etcd-rollout/tests/harness"
	"github.com/etcd-rollout/pulumi-etcd-rollout/tests/harness/memberapi"
)

// rbacEtcd is the mTLS shape of the production manifests: the engine must read the client certificate from
// the Secret behind the pods' volume, so the Role's secrets rule is exercised too.
var rbacEtcd = harness.EtcdSpec{Name: "etcd", ServiceName: "etcd-headless", TLS: true,
	Readiness: memberapi.ReadyOnProbe, GracePeriod: 5 * time.Second}

func newRBACCluster(ctx context.Context, t *testing.T) (*harness.Cluster, *harness.Etcd) {
	t.Helper()
	c := harness.Connect(t)
	ns := c.Namespace(t)
	e, err := c.CreateEtcd(ctx, ns, rbacEtcd)
	require.NoError(t, err)
	return c, e
}

// requireLockedAt checks the partition is at replicas and reports the pods' revisions.
func requireLockedAt(ctx context.Context, t *testing.T, e *harness.Etcd) []string {
	t.Helper()
	sts, err := e.StatefulSet(ctx)
	require.NoError(t, err)
	require.NotNil(t, sts.Spec.UpdateStrategy.RollingUpdate)
	require.EqualValues(t, *sts.Spec.Replicas, *sts.Spec.UpdateStrategy.RollingUpdate.Partition, "the partition is locked at replicas")
	var revs []string
	for i := 0; i < int(*sts.Spec.Replicas); i++ {
		pod, err := e.Pod(ctx, i)
		require.NoError(t, err)
		revs = append(revs, pod.Labels["controller-revision-hash"])
	}
	return revs
}

// A ServiceAccount bound to nothing but deploy/rbac/role.yaml runs a whole TLS rollout with the CLI: the Role
// grants everything the engine needs, and grants nothing it does not (no list or watch but of the StatefulSet
// and its pods, no delete but of pods, no exec, and nothing outside its namespace).
func TestRBACShippedRoleRunsWholeRollout(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
	defer cancel()
	c, e := newRBACCluster(ctx, t)
	sa := bindServiceAccount(ctx, t, c, e.Namespace, loadShippedRole(t))

	for _, denied := range []struct{ verb, group, resource string }{
		{"watch", "", "secrets"}, {"list", "", "configmaps"}, {"update", "apps", "statefulsets"},
		{"deletecollection", "", "pods"}, {"delete", "apps", "statefulsets"}, {"create", "", "pods/exec"}, {"list", "", "secrets"}, {"delete", "coordination.k8s.io", "leases"},
	} {
		assert.False(t, sa.canI(ctx, t, denied.verb, denied.group, denied.resource), "the Role must not grant %s %s", denied.verb, denied.resource)
	}

	rev, err := e.SetTemplateAnnotation(ctx, "example.etcd-rollout/rbac", "2")
	require.NoError(t, err)
	out, code := sa.rbacCLI(t, e, "plan")
	require.Equal(t, 0, code, "plan with the shipped Role:\n%s", out)
	out, code = sa.rbacCLI(t, e, "run")
	require.Equal(t, 0, code, "run with the shipped Role:\n%s", out)
	t.Logf("etcd-rollout run as system:serviceaccount:%s:etcd-rollout:\n%s", e.Namespace, out)
	assert.Contains(t, out, "Rollout complete: 3 members rolled")
	assert.Equal(t, []string{rev, rev, rev}, requireLockedAt(ctx, t, e), "every member at the new revision")

	out, code = sa.rbacCLI(t, e, "status")
	require.Equal(t, 0, code, "status with the shipped Role:\n%s", out)
	assert.Contains(t, out, "partition 3 (locked)")
}

// Each verb of the Role is needed: without it the rollout fails before it disrupts anything (or, for events,
// runs anyway), and the error names the verb and the resource, so an operator knows which rule to add.
func TestRBACMissingVerbIsNamed(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Minute)
	defer cancel()
	c, e := newRBACCluster(ctx, t)
	role := loadShippedRole(t)
	sa := bindServiceAccount(ctx, t, c, e.Namespace, role)
	_, err := e.SetTemplateAnnotation(ctx, "example.etcd-rollout/rbac", "2")
	require.NoError(t, err)
	before := requireLockedAt(ctx, t, e)

	for _, tc := range []struct {
		verb, group, resource string
		// want are the words the error must hold.
		want []string
	}{
		// In this order: a run refused before the Lease leaves none, a later one that got past it leaves it
		// free but present, so the update case finds one to update.
		{verb: "get", group: "apps", resource: "statefulsets", want: []string{"get", "statefulsets"}},
		{verb: "create", group: "coordination.k8s.io", resource: "leases", want: []string{"create", "leases"}},
		{verb: "get", group: "", resource: "pods", want: []string{"get", "pods"}},
		{verb: "update", group: "coordination.k8s.io", resource: "leases", want: []string{"update", "leases"}},
		{verb: "create", group: "", resource: "pods/portforward", want: []string{"create", "pods/portforward"}},
		{verb: "get", group: "", resource: "secrets", want: []string{"get", "secrets"}},
		{verb: "patch", group: "apps", resource: "statefulsets", want: []string{"patch", "statefulsets"}},
		{verb: "get", group: "", resource: "pods/portforward", want: []string{"get", "pods/portforward"}},
	} {
		t.Run(tc.verb+"-"+tc.resource, func(t *testing.T) {
			sa.setRules(ctx, t, withoutVerb(t, role.Rules, tc.resource, tc.verb), tc.verb, tc.group, tc.resource, false)
			// Before its first disruption the engine holds a blocked cluster for up to the ready timeout (a new
			// cluster may still be electing its leader), and a refused read of pods or a refused port-forward
			// looks blocked: a short one keeps the eight cases from waiting 90 s each.
			out, code := sa.rbacCLI(t, e, "run", "--ready-timeout", "5s")
			t.Logf("etcd-rollout run without %s %s (exit %d):\n%s", tc.verb, tc.resource, code, out)
			require.NotEqual(t, 0, code, "the rollout must fail without %s %s", tc.verb, tc.resource)
			for _, w := range tc.want {
				assert.Contains(t, out, w)
			}
			assert.Contains(t, out, harness.ShippedRoleFile, "the error points at the Role")
			assert.Equal(t, before, requireLockedAt(ctx, t, e), "no member was rolled and the partition is locked")
		})
	}
	sa.setRules(ctx, t, role.Rules, "patch", "apps", "statefulsets", true)
}

// The shipped Role is enough for the revert of a member that fails on the new revision (its pod deleted with
// the partition locked), and without pods delete the revert fails naming the verb and the Role, with the
// partition still locked and no other member touched.
func TestRBACShippedRoleRevertsAFailedMember(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	c, e := newRBACCluster(ctx, t)
	role := loadShippedRole(t)
	sa := bindServiceAccount(ctx, t, c, e.Namespace, role)
	require.True(t, sa.canI(ctx, t, "delete", "", "pods"), "the Role grants pods delete for the revert")
	before := requireLockedAt(ctx, t, e)

	_, err := e.SetTemplateAnnotation(ctx, memberapi.AnnotationBroken, "true")
	require.NoError(t, err)
	out, code := sa.rbacCLI(t, e, "run", "--health-timeout", "10s", "--ready-timeout", "30s")
	t.Logf("etcd-rollout run of a broken template with the shipped Role (exit %d):\n%s", code, out)
	assert.Equal(t, 5, code, "a reverted member is a gate failure")
	assert.Contains(t, out, "reverted etcd-2 to "+before[2])
	assert.Equal(t, before, requireLockedAt(ctx, t, e), "etcd-2 back on the old revision, nobody else touched")
	require.NoError(t, e.WaitHealthy(ctx), "every member healthy after the revert")

	sa.setRules(ctx, t, withoutVerb(t, role.Rules, "pods", "delete"), "delete", "", "pods", false)
	out, code = sa.rbacCLI(t, e, "run", "--health-timeout", "10s", "--ready-timeout", "30s")
	t.Logf("etcd-rollout run without pods delete (exit %d):\n%s", code, out)
	assert.NotEqual(t, 0, code)
	assert.Contains(t, out, "etcd-2 was not reverted")
	assert.Contains(t, out, `cannot delete resource "pods"`)
	assert.Contains(t, out, harness.ShippedRoleFile, "the error points at the Role")
	after := requireLockedAt(ctx, t, e)
	assert.Equal(t, before[:2], after[:2], "etcd-0 and etcd-1 untouched")
	sa.setRules(ctx, t, role.Rules, "delete", "", "pods", true)
}
