//go:build faults

package faults_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/etcd-rollout/pulumi-etcd-rollout/rollout"
)

// Members whose data dir is on an emptyDir (the harness wipes it when the pod is recreated) are replaced on the
// local cluster: every member comes back under a new member ID, as a voter, with 0 unplanned elections, every
// key written before still there, and the background client's history linearizable (the fixture checks it).
func TestMembersWhoseDataDiesWithThePodAreReplaced(t *testing.T) {
	t.Parallel()
	for _, replicas := range []int{3, 5} {
		t.Run(fmt.Sprintf("%d members", replicas), func(t *testing.T) {
			t.Parallel()
			replaceAll(t, replicas)
		})
	}
}

// replaceAll rolls a fresh template over a cluster of replicas members whose data dies with their pod.
func replaceAll(t *testing.T, replicas int) {
	spec := httpSpec
	spec.DataDiesWithPod, spec.Replicas = true, replicas
	f := newFixtureOf(t, spec)
	ctx := runCtx(t)
	cli, err := f.etcd.Client(ctx)
	require.NoError(t, err)
	defer cli.Close()
	for i := range 200 {
		_, err := cli.Put(ctx, fmt.Sprintf("before/%03d", i), "v")
		require.NoError(t, err)
	}
	idsBefore := memberIDs(t, cli)
	rev := f.must.ChangeTemplate("")
	before := f.must.Term()

	var plan string
	res, err := f.engine(func(_ *rollout.Config, o *rollout.Options) {
		log := o.OnEvent
		o.OnEvent = func(ev rollout.Event) {
			log(ev)
			if ev.Kind == rollout.EventPlanned {
				plan = ev.Message
			}
		}
	}).Run(ctx)
	require.NoError(t, err)
	t.Logf("result: %s", res.Summary())
	assert.Contains(t, plan, "etcd-1, etcd-0 instead of restarting (their data dies with the pod")
	assert.Len(t, res.MembersRolled, replicas)
	assert.Equal(t, 0, res.UnplannedElections)
	assert.Equal(t, before+uint64(res.LeaderTransfers), f.must.Term(), "raft term rose only by the transfers")
	f.requireState(rev)

	idsAfter := memberIDs(t, cli)
	require.Len(t, idsAfter, replicas)
	for url, id := range idsAfter {
		assert.NotEqual(t, idsBefore[url], id, "the member at %s has a new ID", url)
	}
	got, err := cli.Get(ctx, "before/", clientv3.WithPrefix(), clientv3.WithCountOnly())
	require.NoError(t, err)
	assert.EqualValues(t, 200, got.Count, "every key written before the roll is still there")
}

// memberIDs is etcd's member list by peer URL; every member votes.
func memberIDs(t *testing.T, cli *clientv3.Client) map[string]uint64 {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	list, err := cli.MemberList(ctx)
	require.NoError(t, err)
	out := map[string]uint64{}
	for _, m := range list.Members {
		require.False(t, m.IsLearner, "member %x is a learner", m.ID)
		require.Len(t, m.PeerURLs, 1)
		out[m.PeerURLs[0]] = m.ID
	}
	return out
}
