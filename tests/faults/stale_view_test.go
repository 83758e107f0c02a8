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
)

// The engine's partition write must be conditional on what it saw (issue 21, item 3). Someone else writes
// the pod template between the engine's last look and its lowering of the partition for etcd-1: the write
// is made synchronously in the engine's own "restarting etcd-1 (partition 1)" callback, which the engine
// emits right before it lowers the partition. An unconditional lowering to 1 makes the StatefulSet
// controller restart the highest member not at the new update revision, etcd-2, where the engine has just
// parked the leader (it moves it off etcd-1 onto the updated etcd-2). A conditional one fails: the run stops
// with rollout.ErrInterference and the partition locked, and nothing restarts.
//
// Elections are counted by the test, not taken from the engine's Result: the raft term the harness reads
// from the members when the other writer writes and once the cluster is healthy after the run, minus the
// leader transfers the engine reported making in between (none are expected).
func TestTemplateWrittenBeforeThePartitionIsLoweredRestartsNothing(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	rev := f.must.ChangeTemplate("")
	f.must.PlaceLeader(1) // the engine moves it onto etcd-2 before it restarts etcd-1
	_, uidsBefore := f.must.Pods()

	var (
		wrote          bool
		termAtWrite    uint64
		leaderAtWrite  = -1
		uidsAtWrite    []types.UID
		otherRev       string
		transfersAfter int
	)
	res, err := f.engine(func(_ *rollout.Config, o *rollout.Options) {
		log := o.OnEvent
		o.OnEvent = func(e rollout.Event) {
			log(e)
			if wrote && e.Kind == rollout.EventLeaderMoved {
				transfersAfter++
			}
			if wrote || !memberEvent(e, rollout.EventMemberRestarting, "etcd-1") {
				return
			}
			wrote = true
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			var err error
			leaderAtWrite, termAtWrite, err = f.etcd.Leader(ctx)
			require.NoError(t, err)
			_, uidsAtWrite = f.must.Pods()
			otherRev, err = f.etcd.UpdateTemplate(ctx, func(tpl *corev1.PodTemplateSpec) {
				tpl.Annotations["someone-else"] = time.Now().Format(time.RFC3339Nano)
			})
			require.NoError(t, err)
		}
	}).Run(runCtx(t))
	require.True(t, wrote, "the run never reported restarting etcd-1: the template was not written before the lowering")
	t.Logf("run: %v", err)
	assert.Equal(t, 2, leaderAtWrite, "the leader was parked on the updated etcd-2 when the other writer wrote")
	assert.NotEqual(t, rev, otherRev, "the other write made a new revision")

	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	require.NoError(t, f.etcd.WaitHealthy(ctx))
	_, termAfter, lerr := f.etcd.Leader(ctx)
	require.NoError(t, lerr)
	unplanned := int(termAfter-termAtWrite) - transfersAfter
	t.Logf("raft term %d when the template was written, %d after the run; %d leader transfers by the engine in between", termAtWrite, termAfter, transfersAfter)

	require.Equal(t, 3, f.must.Partition(), "partition locked at the end")
	_, uidsAfter := f.must.Pods()
	assert.Equal(t, uidsAtWrite[2], uidsAfter[2], "etcd-2 (the leader) was restarted by the controller acting on the other writer's template")
	assert.Equal(t, uidsBefore[:2], uidsAfter[:2], "etcd-0 and etcd-1 were never restarted")
	assert.Zero(t, unplanned, "unplanned leader changes after the other write, by the raft term")
	require.ErrorIs(t, err, rollout.ErrInterference)
	assert.Contains(t, err.Error(), "find who changed it")
	assert.Equal(t, []string{"etcd-2"}, res.MembersRolled)
}
