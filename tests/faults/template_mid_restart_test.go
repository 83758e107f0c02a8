//go:build faults

package faults_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/etcd-rollout/pulumi-etcd-rollout/rollout"
	"github.com/etcd-rollout/pulumi-etcd-rollout/tests/harness"
	"github.com/etcd-rollout/pulumi-etcd-rollout/tests/harness/memberapi"
)

// The new revision's members load slowly: etcd-2 comes back Ready (no readinessProbe) but serves only 5 s
// later. While it loads, someone else changes the template (`kubectl rollout restart` does exactly this
// write). Had the partition still been at 2, the StatefulSet controller would act on the new template with
// no one judging etcd's health; because the engine locked it again as soon as etcd-2 existed at the update
// revision, the write restarts nothing: the run stops with ErrInterference, etcd-1 and etcd-0 keep their
// pods, and the two of them keep quorum (a write through them alone succeeds) while etcd-2 catches up.
func TestTemplateWrittenWhileAMemberLoadsCostsNoQuorum(t *testing.T) {
	t.Parallel()
	const serveDelay = 5 * time.Second
	f := newFixture(t)
	f.must.PlaceLeader(0) // no transfer needed: the case is about the write, not the leader
	rev := f.must.ChangeStartFaults(harness.StartFaults{ServeDelay: serveDelay})
	_, uidsBefore := f.must.Pods()

	// What was true when the other writer wrote, sampled in the engine's own progress callback.
	var (
		wrote           bool
		loadingUID      types.UID // etcd-2's pod when it was loading
		partitionBefore int
		partitionAfter  int
		otherRev        string
		quorumPut       error
		stillLoading    bool // etcd-2 still loading after the write and the put: they did not need it
	)
	res, err := f.engine(func(_ *rollout.Config, o *rollout.Options) {
		log := o.OnEvent
		o.OnEvent = func(e rollout.Event) {
			log(e)
			if wrote || !etcd2Ready(e) {
				return
			}
			wrote = true
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			m, err := f.etcd.Member(ctx, 2)
			require.NoError(t, err)
			require.Equal(t, memberapi.StateLoading, m.State, "etcd-2 is Ready but still loading when the template is written")
			loadingUID = types.UID(m.PodUID)
			partitionBefore = f.must.Partition()
			otherRev, err = f.etcd.UpdateTemplate(ctx, func(tpl *corev1.PodTemplateSpec) {
				tpl.Annotations["kubectl.kubernetes.io/restartedAt"] = time.Now().Format(time.RFC3339)
			})
			require.NoError(t, err)
			partitionAfter = f.must.Partition()
			cli, err := f.etcd.Client(ctx, 0, 1)
			require.NoError(t, err)
			defer cli.Close()
			putCtx, putCancel := context.WithTimeout(ctx, 3*time.Second)
			_, quorumPut = cli.Put(putCtx, "quorum-while-etcd-2-loads", "ok")
			putCancel()
			m, err = f.etcd.Member(ctx, 2)
			require.NoError(t, err)
			stillLoading = m.State == memberapi.StateLoading && types.UID(m.PodUID) == loadingUID
		}
	}).Run(runCtx(t))

	require.True(t, wrote, "the run never reported etcd-2 Ready: the template was not written mid-restart")
	assert.NotEqual(t, uidsBefore[2], loadingUID, "the loading member was the new etcd-2")
	assert.Equal(t, 3, partitionBefore, "the partition was locked again while etcd-2 was still loading")
	assert.Equal(t, 3, partitionAfter, "the partition was still locked right after the other write")
	assert.NotEqual(t, rev, otherRev, "the other write made a new revision")
	assert.NoError(t, quorumPut, "etcd-0 and etcd-1 kept quorum while etcd-2 loaded")
	assert.True(t, stillLoading, "etcd-2 was still loading after the write and the put (the serve delay was too short to show anything)")

	require.ErrorIs(t, err, rollout.ErrInterference)
	t.Logf("error: %v", err)
	assert.Contains(t, err.Error(), "while waiting for etcd-2: partition 3 (this run set 3)", "stopped in etcd-2's gates, after its own re-lock")
	assert.Empty(t, res.MembersRolled, "etcd-2 was not counted as rolled")

	// Once etcd-2 has loaded, nothing else has moved: the other write restarted nobody.
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	require.NoError(t, f.etcd.WaitHealthy(ctx))
	require.Equal(t, 3, f.must.Partition(), "partition locked at the end")
	revs, uidsAfter := f.must.Pods()
	assert.Equal(t, []int{2}, restarted(uidsBefore, uidsAfter), "etcd-1 and etcd-0 were never restarted")
	assert.Equal(t, loadingUID, uidsAfter[2], "etcd-2 was not restarted a second time by the other write")
	assert.Equal(t, rev, revs[2], "etcd-2 is at the revision this run rolled to")
	assert.NotEqual(t, otherRev, revs[1])
	assert.NotEqual(t, otherRev, revs[0])
}
