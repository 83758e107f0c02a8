//go:build faults

package faults_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	clientv3 "go.etcd.io/etcd/client/v3"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

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
	oldIDs := slices.Collect(maps.Values(idsBefore))
	for i := range replicas {
		all := starts(t, f, i)
		start := all[len(all)-1]
		assert.Equal(t, "starting local member", start.Msg, "etcd-%d's last process started with an empty data dir", i)
		assert.NotContains(t, oldIDs, start.ID, "etcd-%d started under a new member ID, never under one that voted before", i)
	}
	got, err := cli.Get(ctx, "before/", clientv3.WithPrefix(), clientv3.WithCountOnly())
	require.NoError(t, err)
	assert.EqualValues(t, 200, got.Count, "every key written before the roll is still there")
}

// What a plain restart does to a member whose data dies with its pod (the default StatefulSet roll, a
// kubectl delete, and this engine before issue 32), shown with real etcd. The recreated pod's etcd finds no
// WAL, starts with --initial-cluster-state=existing as StatefulSet start scripts do, and takes the member ID
// still registered for its peer URL: "starting local member" under the old ID, not "restarting". Then:
//  1. while the leader remembers how far the old voter had acknowledged, raft's own guard stops it: it
//     panics ("tocommit(N) is out of range [lastIndex(0)]") and crash-loops: one member down, by our hand;
//  2. once the leadership changes (a leader transfer, as the next member's roll makes, or an election), the
//     new leader knows nothing of it: the next start (replaying the WAL its first, empty start wrote) is
//     accepted, catches up and passes every health check, an old voter whose log began empty, which nothing
//     in the member list or etcd's health tells apart.
func TestARestartOfAMemberWhoseDataDiedAdoptsItsOldID(t *testing.T) {
	t.Parallel()
	spec := httpSpec
	spec.DataDiesWithPod = true
	f := newFixtureOf(t, spec)
	ctx := runCtx(t)
	cli, err := f.etcd.Client(ctx)
	require.NoError(t, err)
	defer cli.Close()
	f.putData(100)
	f.must.PlaceLeader(0)
	idsBefore := memberIDs(t, cli)
	before := starts(t, f, 2)
	first := before[len(before)-1]

	pod, err := f.etcd.Pod(ctx, 2)
	require.NoError(t, err)
	require.NoError(t, f.c.Kube.CoreV1().Pods(pod.Namespace).Delete(ctx, pod.Name, metav1.DeleteOptions{}))
	_, err = f.etcd.WaitPodRecreated(ctx, 2, pod.UID)
	require.NoError(t, err)
	// Two starts in the new pod: the first has run its course (a start that panics does so within
	// milliseconds of its first heartbeat, long before the kubelet's back-off restarts it).
	var since []memberStart
	require.Eventually(t, func() bool {
		since = starts(t, f, 2)[len(before):]
		return len(since) >= 2
	}, time.Minute, 200*time.Millisecond, "etcd-2's new pod starts its etcd twice")
	again := since[0]
	assert.Equal(t, "starting local member", again.Msg, "the new process found no WAL: its data died with the pod")
	assert.Equal(t, first.ID, again.ID, "and it took the old voter's member ID")
	require.True(t, again.Panicked, "raft's guard stopped it")
	t.Logf("etcd-2 under its old ID %x with an empty log, leader etcd-0: %s", again.ID, again.Panic)

	f.must.PlaceLeader(1)
	require.NoError(t, f.etcd.WaitHealthy(ctx), "with a new leader, the old voter's empty log is accepted")
	all := starts(t, f, 2)
	accepted := all[len(all)-1]
	// It replays the WAL its first, empty start in this pod wrote ("restarting"): a log that began empty.
	assert.Equal(t, first.ID, accepted.ID, "healthy under the ID whose data it lost")
	assert.False(t, accepted.Panicked, "this start was accepted")
	assert.Equal(t, idsBefore, memberIDs(t, cli), "etcd lists the same voters: nothing in the member list tells")
}

// memberStart is one start of a member's etcd, from its log: "starting local member" (no WAL: an empty data
// dir) or "restarting local member" (its WAL replayed), with the member ID it took, and whether that process
// then hit raft's guard against a lost log (Panic: its message).
type memberStart struct {
	Msg      string
	ID       uint64
	At       string
	Panicked bool
	Panic    string
}

// starts are the starts in the log of the member at ordinal, in order (every incarnation appends to it).
func starts(t *testing.T, f *fixture, ordinal int) []memberStart {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	path, err := f.etcd.LogFile(ctx, ordinal)
	require.NoError(t, err)
	file, err := os.Open(path)
	require.NoError(t, err)
	defer file.Close()
	var out []memberStart
	sc := bufio.NewScanner(file)
	sc.Buffer(make([]byte, 0, 64*1024), 1024*1024)
	for sc.Scan() {
		line := sc.Text()
		var entry struct {
			Level string `json:"level"`
			Msg   string `json:"msg"`
			ID    string `json:"local-member-id"`
			TS    string `json:"ts"`
		}
		if !strings.HasPrefix(line, "{") || json.Unmarshal([]byte(line), &entry) != nil {
			continue
		}
		switch {
		case entry.Msg == "starting local member" || entry.Msg == "restarting local member":
			id, err := strconv.ParseUint(entry.ID, 16, 64)
			require.NoError(t, err, "local-member-id %q", entry.ID)
			out = append(out, memberStart{Msg: entry.Msg, ID: id, At: entry.TS})
		case entry.Level == "panic" && strings.Contains(entry.Msg, "out of range [lastIndex(0)]") && len(out) > 0:
			out[len(out)-1].Panicked, out[len(out)-1].Panic = true, entry.Msg
		}
	}
	require.NoError(t, sc.Err())
	require.NotEmpty(t, out, "%s has no start of etcd-%d", path, ordinal)
	return out
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
