//go:build faults

package faults_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/etcd-rollout/pulumi-etcd-rollout/rollout"
	"github.com/etcd-rollout/pulumi-etcd-rollout/tests/harness"
)

// A 3.5 → 3.6 upgrade whose new revision answers no client on one chosen member: etcd runs and joins Raft
// (so the leader learns its version, and once every member runs 3.6 the cluster version moves to 3.6), but
// its client port refuses every connection, so the member never passes the etcd health gate. Where that
// member sits in the roll decides whether the engine may revert it.

// minorUpgrade is the 3.5 cluster the upgrade starts from: the HTTP production shape on etcd 3.5.
func minorUpgrade(t *testing.T) *fixture {
	t.Helper()
	spec := httpSpec
	spec.Version = "3.5"
	f := newFixtureOf(t, spec)
	f.putData(100)
	f.requireClusterVersion("3.5", "before the upgrade")
	return f
}

// putData writes n keys besides the background client's, so the members carry data across versions.
func (f *fixture) putData(n int) {
	f.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cli, err := f.etcd.Client(ctx)
	require.NoError(f.t, err)
	defer cli.Close()
	for i := range n {
		_, err := cli.Put(ctx, fmt.Sprintf("/data/%03d", i), fmt.Sprintf("written on 3.5: %d", i))
		require.NoError(f.t, err)
	}
}

// requireClusterVersion checks the cluster version every member reports (the harness asks each member
// directly, so the one whose client port refuses answers too).
func (f *fixture) requireClusterVersion(minor, when string) {
	f.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for i := range f.etcd.Spec.Replicas {
		v, err := f.etcd.ClusterVersion(ctx, i)
		require.NoError(f.t, err)
		require.Regexp(f.t, `^`+minor+`\.`, v, "cluster version reported by %s %s", f.etcd.PodName(i), when)
	}
}

// requireProductView checks, through the engine's own path (port-forwards), which members are healthy.
func (f *fixture) requireProductView(healthy ...bool) rollout.ClusterState {
	f.t.Helper()
	probe := f.engine(func(_ *rollout.Config, o *rollout.Options) { o.OnEvent = nil })
	var st rollout.ClusterState
	var last string
	require.Eventually(f.t, func() bool {
		ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
		defer cancel()
		var err error
		if st, err = probe.Observe(ctx); err != nil {
			last = err.Error()
			return false
		}
		for i, m := range st.Members {
			if m.Healthy != healthy[i] {
				last = fmt.Sprintf("%s healthy=%v (%s)", m.Pod, m.Healthy, m.Problem)
				return false
			}
		}
		return true
	}, time.Minute, 500*time.Millisecond, "members healthy through port-forwards, by ordinal, should be %v (last: %s)", healthy, last)
	return st
}

// pids are the member processes by ordinal: a container restart inside the same pod changes one too.
func (f *fixture) pids() []int {
	f.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	members, err := f.etcd.Members(ctx)
	require.NoError(f.t, err)
	out := make([]int, len(members))
	for i, m := range members {
		out[i] = m.PID
	}
	return out
}

// The last member of the roll (etcd-0) fails on 3.6 after etcd-2 and etcd-1 rolled: every member now runs
// 3.6, so the cluster version moves to 3.6, and etcd would refuse etcd-0 back on 3.5. The engine must refuse
// the revert with an error that says so, and leave etcd-0 where it is instead of deleting its pod.
func TestPointOfNoReturnRefusesTheRevert(t *testing.T) {
	t.Parallel()
	f := minorUpgrade(t)
	_, uidsBefore := f.must.Pods()
	rev := f.must.ChangeVersion("3.6", harness.StartFaults{ClientsRefused: true, Ordinals: []int{0}})

	start := time.Now()
	res, err := f.engine(func(cfg *rollout.Config, _ *rollout.Options) {
		cfg.HealthTimeout = 20 * time.Second
		cfg.Cooldown = 0
	}).Run(runCtx(t))
	t.Logf("run ended after %s: %v", time.Since(start).Round(time.Millisecond), err)
	require.Error(t, err)
	// assert, not require: the state checks below say what the refused revert left behind either way.
	assert.ErrorIs(t, err, rollout.ErrPointOfNoReturn)
	var gate *rollout.GateTimeoutError
	require.ErrorAs(t, err, &gate)
	assert.Equal(t, "etcd-0", gate.Pod)
	assert.Equal(t, rollout.GateEtcdHealth, gate.Gate)
	var reverted *rollout.RevertedError
	assert.False(t, errors.As(err, &reverted), "nothing was reverted")
	assert.Contains(t, err.Error(), "past the point of no return")
	assert.Contains(t, err.Error(), "the cluster version is already 3.6")
	assert.Contains(t, err.Error(), "etcd-0 was not reverted")
	assert.Equal(t, []string{"etcd-2", "etcd-1"}, res.MembersRolled, "etcd-2 and etcd-1 rolled fine")
	require.NotNil(t, res.Failure)
	assert.Equal(t, "etcd-0", res.Failure.Pod)
	assert.Empty(t, res.Failure.RevertedTo)
	assert.Contains(t, res.Failure.RevertError, "past the point of no return")

	require.Equal(t, 3, f.must.Partition(), "partition locked again")
	revs, uidsAfter := f.must.Pods()
	assert.Equal(t, []string{rev, rev, rev}, revs, "every pod, etcd-0 too, is at the update revision: etcd-0 was not deleted")
	assert.Equal(t, []int{0, 1, 2}, restarted(uidsBefore, uidsAfter))
	pidsAfter := f.pids()
	f.requireProductView(false, true, true)
	f.requireClusterVersion("3.6", "after the run")

	// Refused means left alone: a little later etcd-0 is still the same pod and process, on 3.6.
	time.Sleep(3 * time.Second)
	_, uidsLater := f.must.Pods()
	assert.Equal(t, uidsAfter, uidsLater, "no pod was deleted after the refusal")
	assert.Equal(t, pidsAfter, f.pids(), "no member was restarted after the refusal")
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	m0, err := f.etcd.Member(ctx, 0)
	require.NoError(t, err)
	assert.Equal(t, "3.6", m0.Version)
	assert.True(t, m0.ClientsRefused)
}

// The first member of the roll (etcd-2) fails on 3.6 while etcd-1 and etcd-0 still run 3.5: the cluster
// version is still 3.5, so the engine reverts etcd-2 to the 3.5 revision, and touches nobody else.
func TestRevertAcrossAMinorBeforeThePointOfNoReturn(t *testing.T) {
	t.Parallel()
	f := minorUpgrade(t)
	oldRev := f.must.StatefulSet().Status.CurrentRevision
	_, uidsBefore := f.must.Pods()
	pidsBefore := f.pids()
	rev := f.must.ChangeVersion("3.6", harness.StartFaults{ClientsRefused: true, Ordinals: []int{2}})

	start := time.Now()
	res, err := f.engine(func(cfg *rollout.Config, _ *rollout.Options) {
		cfg.HealthTimeout = 20 * time.Second
		cfg.Cooldown = 0
	}).Run(runCtx(t))
	t.Logf("run ended after %s: %v", time.Since(start).Round(time.Millisecond), err)
	var reverted *rollout.RevertedError
	require.ErrorAs(t, err, &reverted, "got %v", err)
	assert.NotErrorIs(t, err, rollout.ErrPointOfNoReturn)
	assert.Equal(t, "etcd-2", reverted.Pod)
	assert.Equal(t, rev, reverted.From)
	assert.Equal(t, oldRev, reverted.To)
	assert.Equal(t, rollout.GateEtcdHealth, reverted.Cause.Gate)
	assert.Contains(t, err.Error(), "reverted etcd-2 to "+oldRev)
	assert.Empty(t, res.MembersRolled)
	require.NotNil(t, res.Failure)
	assert.Equal(t, oldRev, res.Failure.RevertedTo)

	require.Equal(t, 3, f.must.Partition(), "partition locked again")
	revs, uidsAfter := f.must.Pods()
	assert.Equal(t, []string{oldRev, oldRev, oldRev}, revs, "etcd-2 is back on the 3.5 revision")
	assert.Equal(t, []int{2}, restarted(uidsBefore, uidsAfter), "only etcd-2 got new pods")
	pidsAfter := f.pids()
	assert.Equal(t, pidsBefore[:2], pidsAfter[:2], "etcd-0 and etcd-1 never restarted")
	f.requireProductView(true, true, true)
	f.requireClusterVersion("3.5", "after the revert")
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	m2, err := f.etcd.Member(ctx, 2)
	require.NoError(t, err)
	assert.Equal(t, "3.5", m2.Version, "etcd-2 runs the 3.5 binary again")
	assert.False(t, m2.ClientsRefused)
	require.NoError(t, f.etcd.WaitHealthy(ctx))
}
