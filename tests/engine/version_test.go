//go:build integration

package engine_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	clientv3 "go.etcd.io/etcd/client/v3"
	corev1 "k8s.io/api/core/v1"

	"github.com/etcd-rollout/pulumi-etcd-rollout/rollout"
	"github.com/etcd-rollout/pulumi-etcd-rollout/tests/harness"
)

// A 3.5 cluster given a 3.6 template: the plan states the version path from what the members report
// (server versions from the Status RPC, the cluster version from /version), and a template carrying a flag
// 3.6 no longer accepts is refused by the engine before anything restarts. Plain and mTLS: the cluster
// version is read over the member's client TLS too.
func TestVersionPathFromEtcdAndAFlagTheTargetRefuses(t *testing.T) {
	for name, spec := range map[string]harness.EtcdSpec{"http": httpSpec, "mtls": mtlsSpec} {
		t.Run(name, func(t *testing.T) { versionPathAndRefusedFlag(t, spec) })
	}
}

func versionPathAndRefusedFlag(t *testing.T, spec harness.EtcdSpec) {
	spec.Version = "3.5"
	f := newFixture(t, spec)
	_, uidsBefore := f.must.Pods()
	revBefore := f.must.StatefulSet().Status.CurrentRevision
	f.must.ChangeVersion("3.6", harness.StartFaults{})

	eng := f.engine(nil)
	ctx := runCtx(t)
	st, plan, err := eng.Plan(ctx)
	require.NoError(t, err)
	for _, m := range st.Members {
		assert.Regexp(t, `^3\.5\.\d+$`, m.ServerVersion, "%s's own version", m.Pod)
		assert.Empty(t, m.StorageVersion, "%s: etcd 3.5 reports no storage version", m.Pod)
	}
	assert.Regexp(t, `^3\.5\.`, st.ClusterVersion)
	last := f.etcd.PodName(0)
	assert.Regexp(t, `^etcd 3\.5\.\d+ → 3\.6\.\d+ \(cluster version 3\.5 → 3\.6 once `+last+` is rolled\)$`, plan.VersionLine())
	assert.Contains(t, plan.String(), "cluster version 3.5 → 3.6 once "+last+" is rolled (the point of no return")
	t.Logf("plan: %s", plan)

	// The same 3.6 template, now also carrying a flag 3.6 removed.
	ctxT, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	_, err = f.etcd.UpdateTemplate(ctxT, func(tpl *corev1.PodTemplateSpec) {
		for i := range tpl.Spec.Containers {
			if tpl.Spec.Containers[i].Name == "etcd" {
				tpl.Spec.Containers[i].Args = append(tpl.Spec.Containers[i].Args, "--experimental-enable-v2v3=/v2/")
			}
		}
	})
	require.NoError(t, err)
	res, err := f.engine(nil).Run(ctx)
	require.ErrorIs(t, err, rollout.ErrFlagRefused)
	require.ErrorIs(t, err, rollout.ErrVersionPath)
	assert.Contains(t, err.Error(), "etcd 3.6 does not accept --experimental-enable-v2v3")
	assert.Empty(t, res.MembersRolled)
	assert.Zero(t, res.LeaderTransfers)
	revs, uids := f.must.Pods()
	assert.Equal(t, uidsBefore, uids, "no pod was recreated")
	for i, r := range revs {
		assert.Equal(t, revBefore, r, "pod %d still on the 3.5 revision", i)
	}
	assert.Equal(t, f.etcd.Spec.Replicas, f.must.Partition(), "partition locked")
	f.requireClusterVersion35(ctx)
}

func (f *fixture) requireClusterVersion35(ctx context.Context) {
	f.t.Helper()
	for i := range f.etcd.Spec.Replicas {
		v, err := f.etcd.ClusterVersion(ctx, i)
		require.NoError(f.t, err)
		require.Regexp(f.t, `^3\.5\.`, v, "cluster version reported by %s", f.etcd.PodName(i))
	}
}

// On etcd 3.6 every member also reports its storage version, and the cluster version is 3.6; a template
// change that keeps the version shows no version path; a downgrade enabled through etcd's API is reported
// by every member until it is cancelled.
func TestVersionsOfA36Cluster(t *testing.T) {
	f := newFixture(t, httpSpec)
	f.must.ChangeTemplate("versions-36")
	// etcd raises the storage version after the cluster version, by a proposal of its own (the leader's
	// monitor, on the change or within 4 s), so a new cluster reports 3.5.0 at first: CI caught one 0.3 s
	// after its members were healthy.
	st, plan, converged := plan36(t, f)
	require.True(t, converged, "every member reports storage version 3.6 within 30 s (last: %+v)", st.Members)
	for _, m := range st.Members {
		assert.Regexp(t, `^3\.6\.\d+$`, m.ServerVersion, "%s's own version", m.Pod)
	}
	assert.Regexp(t, `^3\.6\.`, st.ClusterVersion)
	assert.Len(t, plan.Roll, 3)
	assert.Empty(t, plan.VersionLine(), "the template change keeps the version")
	for _, m := range st.Members {
		assert.Empty(t, m.DowngradeTarget, "%s: no downgrade enabled", m.Pod)
	}

	// A downgrade enabled through etcd's API shows on every member (and lowers the cluster version);
	// cancelled again, the cluster goes back to 3.6.
	ctx := runCtx(t)
	cli := f.client()
	_, err := cli.Downgrade(ctx, clientv3.DowngradeEnable, "3.5")
	require.NoError(t, err)
	t.Cleanup(func() { _, _ = cli.Downgrade(context.Background(), clientv3.DowngradeCancel, "") })
	st, err = f.engine(nil).Observe(ctx)
	require.NoError(t, err)
	for _, m := range st.Members {
		assert.Regexp(t, `^3\.5\.`, m.DowngradeTarget, "%s reports the enabled downgrade", m.Pod)
	}
	_, err = cli.Downgrade(ctx, clientv3.DowngradeCancel, "")
	require.NoError(t, err)
	require.Eventually(t, func() bool {
		st, err = f.engine(nil).Observe(ctx)
		return err == nil && st.Members[0].DowngradeTarget == "" && strings.HasPrefix(st.ClusterVersion, "3.6.")
	}, 30*time.Second, 500*time.Millisecond, "downgrade cancelled: cluster version back to 3.6 (last: %q, target %q)", st.ClusterVersion, st.Members[0].DowngradeTarget)
}

// plan36 plans until every member reports storage version 3.6, for up to 30 s, and returns the last plan
// and whether it got there.
func plan36(t *testing.T, f *fixture) (rollout.ClusterState, rollout.Plan, bool) {
	deadline := time.Now().Add(30 * time.Second)
	for {
		st, plan, err := f.engine(nil).Plan(runCtx(t))
		require.NoError(t, err)
		converged := true
		for _, m := range st.Members {
			converged = converged && strings.HasPrefix(m.StorageVersion, "3.6.")
		}
		if converged || time.Now().After(deadline) {
			return st, plan, converged
		}
		time.Sleep(500 * time.Millisecond)
	}
}
