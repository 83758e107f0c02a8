package provider

import (
	"context"
	"errors"
	"testing"
	"time"

	p "github.com/pulumi/pulumi-go-provider"
	"github.com/pulumi/pulumi-go-provider/infer"
	"github.com/pulumi/pulumi/sdk/v3/go/property"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/etcd-rollout/pulumi-etcd-rollout/rollout"
)

func finished(members ...string) rollout.Result {
	start := time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)
	return rollout.Result{
		UpdateRevision: "rev-b", MembersRolled: members, LeaderTransfers: 2, APIRequests: 412,
		StartedAt: start, FinishedAt: start.Add(90 * time.Second),
	}
}

// A run that could not measure its unplanned elections (no raft term read at its start or its end) leaves the
// count out of the outputs and says so in its summary: never a 0 that nobody counted.
func TestAnUnmeasuredElectionCountIsAbsentNotZero(t *testing.T) {
	logs := recordLogs(t)
	res := finished("etcd-2", "etcd-1", "etcd-0")
	res.ElectionsUnknown, res.ElectionsUnknownWhy = true, "no raft term read at the start or the end"
	f := &fakeCluster{uid: "uid-1", state: healthyState("rev-b", 2), result: res}
	s := server(t, f.deps())
	resp, err := s.Update(p.UpdateRequest{Urn: rolloutURN, ID: "db/etcd", State: state(nil),
		Inputs: inputs(map[string]property.Value{"versionHash": property.New("v2")})})
	require.NoError(t, err)
	_, has := resp.Properties.GetOk("unplannedElections")
	assert.False(t, has, "an unmeasured count is absent")
	assert.Contains(t, logs.messages(), "db/etcd: rolled 3 member(s) (etcd-2, etcd-1, etcd-0) to revision rev-b in 1m30s; 2 leader transfer(s), unplanned elections unknown (no raft term read at the start or the end), 412 API request(s); partition locked")
}

func TestUpdateRunsTheEngineAndRecordsTheResult(t *testing.T) {
	logs := recordLogs(t)
	f := &fakeCluster{uid: "uid-1", state: healthyState("rev-b", 2), result: finished("etcd-2", "etcd-1", "etcd-0"),
		events: []string{"move leader etcd-2 → etcd-0", "lower partition to 2"}}
	s := server(t, f.deps())

	resp, err := s.Update(p.UpdateRequest{Urn: rolloutURN, ID: "db/etcd", State: state(nil),
		Inputs: inputs(map[string]property.Value{"versionHash": property.New("v2")})})
	require.NoError(t, err)
	assert.Equal(t, 1, f.runs)
	out := resp.Properties
	assert.Equal(t, "rev-b", out.Get("updateRevision").AsString())
	assert.Equal(t, 2.0, out.Get("leaderTransfers").AsNumber())
	assert.Equal(t, 0.0, out.Get("unplannedElections").AsNumber())
	assert.Equal(t, "2026-11-29T12:01:30Z", out.Get("finishedAt").AsString())
	assert.True(t, out.Get("complete").AsBool())
	assert.Equal(t, "uid-1", out.Get("statefulSetUid").AsString())
	assert.Empty(t, planOf(out), "nothing is pending after a complete run")
	_, hasKubeconfig := out.GetOk("kubeconfig")
	assert.False(t, hasKubeconfig, "credentials are not kept in the outputs")

	msgs := logs.messages()
	assert.Contains(t, msgs, "move leader etcd-2 → etcd-0", "each engine event is a status line")
	assert.Contains(t, msgs, "db/etcd: rolled 3 member(s) (etcd-2, etcd-1, etcd-0) to revision rev-b in 1m30s; 2 leader transfer(s), 0 unplanned election(s), 412 API request(s); partition locked")
	for _, m := range msgs {
		assert.NotContains(t, m, "/tmp/kubeconfig", "the kubeconfig never reaches the logs")
	}
	require.Len(t, f.configs, 1)
	assert.Equal(t, rollout.DefaultCooldown, f.configs[0].Cooldown)
	assert.Equal(t, ClusterAccess{Kubeconfig: "/tmp/kubeconfig"}, f.accesses[0])
}

func TestPreviewRunsNothing(t *testing.T) {
	f := &fakeCluster{uid: "uid-1", state: healthyState("rev-a", 0)}
	s := server(t, f.deps())
	_, err := s.Create(p.CreateRequest{Urn: rolloutURN, Properties: inputs(nil), DryRun: true})
	require.NoError(t, err)
	_, err = s.Update(p.UpdateRequest{Urn: rolloutURN, ID: "db/etcd", State: state(nil), Inputs: inputs(nil), DryRun: true})
	require.NoError(t, err)
	assert.Zero(t, f.runs)
}

func TestCreateRecordsTheStatefulSetUID(t *testing.T) {
	f := &fakeCluster{uid: "uid-7", state: healthyState("rev-a", 0), result: finished()}
	resp, err := server(t, f.deps()).Create(p.CreateRequest{Urn: rolloutURN, Properties: inputs(nil)})
	require.NoError(t, err)
	assert.Equal(t, "db/etcd", resp.ID)
	assert.Equal(t, "uid-7", resp.Properties.Get("statefulSetUid").AsString())
}

func TestUpdateRefusesAnotherCluster(t *testing.T) {
	f := &fakeCluster{uid: "uid-other", state: healthyState("rev-a", 0)}
	_, err := server(t, f.deps()).Update(p.UpdateRequest{Urn: rolloutURN, ID: "db/etcd", State: state(nil), Inputs: inputs(nil)})
	require.Error(t, err)
	assert.Contains(t, err.Error(), "Refusing to roll it")
	assert.Zero(t, f.runs, "nothing may run on a different StatefulSet")
}

func TestFailedRunKeepsPartialState(t *testing.T) {
	logs := recordLogs(t)
	partial := rollout.Result{UpdateRevision: "rev-b", MembersRolled: []string{"etcd-2"}, LeaderTransfers: 1,
		FinishedAt: time.Now()}
	f := &fakeCluster{uid: "uid-1", state: healthyState("rev-b", 2), result: partial,
		runErr: errors.New("etcd-1 not healthy after 60s")}
	resp, err := server(t, f.deps()).Update(p.UpdateRequest{Urn: rolloutURN, ID: "db/etcd", State: state(nil),
		Inputs: inputs(map[string]property.Value{"versionHash": property.New("v2")})})

	require.Error(t, err)
	var initErr infer.ResourceInitFailedError
	require.ErrorAs(t, err, &initErr, "a stopped rollout is a partial update, so the next up resumes")
	assert.Contains(t, initErr.Reasons[0], "stopped after 1 member(s) (etcd-2): etcd-1 not healthy after 60s")
	require.NotNil(t, resp.PartialState, "Pulumi records the partial state")
	out := resp.Properties
	assert.Equal(t, []string{"etcd-2"}, stringsOf(out.Get("membersRolled")), "the member done is kept")
	assert.False(t, out.Get("complete").AsBool())
	assert.Empty(t, out.Get("finishedAt").AsString(), "a stopped run has not finished")
	assert.Equal(t, "v2", out.Get("versionHash").AsString())
	assert.NotEmpty(t, planOf(out), "the state says work is pending")
	assert.Contains(t, logs.messages(), initErr.Reasons[0])
}

func TestCancelStopsTheEngine(t *testing.T) {
	f := &fakeCluster{uid: "uid-1", state: healthyState("rev-b", 2), blockRun: true,
		result: rollout.Result{UpdateRevision: "rev-b", MembersRolled: []string{"etcd-2"}}}
	s := server(t, f.deps())
	done := make(chan error, 1)
	go func() {
		_, err := s.Update(p.UpdateRequest{Urn: rolloutURN, ID: "db/etcd", State: state(nil),
			Inputs: inputs(map[string]property.Value{"versionHash": property.New("v2")})})
		done <- err
	}()
	require.Eventually(t, func() bool {
		f.mu.Lock()
		defer f.mu.Unlock()
		return f.runs == 1
	}, 5*time.Second, 10*time.Millisecond)
	require.NoError(t, s.Cancel())
	select {
	case err := <-done:
		var initErr infer.ResourceInitFailedError
		require.ErrorAs(t, err, &initErr)
		assert.Contains(t, initErr.Reasons[0], "was cancelled after 1 member(s) (etcd-2)")
		assert.ErrorIs(t, f.runCtx.Err(), context.Canceled)
	case <-time.After(5 * time.Second):
		t.Fatal("Update did not return after Cancel")
	}
}

func TestDeleteTouchesNothing(t *testing.T) {
	logs := recordLogs(t)
	f := &fakeCluster{uid: "uid-1"}
	require.NoError(t, server(t, f.deps()).Delete(p.DeleteRequest{Urn: rolloutURN, ID: "db/etcd", Properties: state(nil)}))
	assert.Empty(t, f.configs, "no engine is started on delete")
	assert.Empty(t, f.accesses, "the cluster is not even contacted")
	require.NotEmpty(t, logs.messages())
	assert.Contains(t, logs.messages()[0], "left as it is")
}

func stringsOf(v property.Value) []string {
	var out []string
	for _, e := range v.AsArray().AsSlice() {
		out = append(out, e.AsString())
	}
	return out
}

// A run that stops records in the state's plan what is left, read afresh from the cluster (not the plan the
// run started from), so the state says where the roll stands and what the next `pulumi up` does.
func TestFailedRunRecordsWhatIsLeft(t *testing.T) {
	left := healthyState("rev-b", 2)
	left.Members[0].Revision, left.Members[1].Revision = "rev-a", "rev-a"
	f := &fakeCluster{uid: "uid-1", state: left, result: rollout.Result{UpdateRevision: "rev-b", MembersRolled: []string{"etcd-2"}},
		runErr: errors.New("etcd-1 not healthy after 60s")}
	resp, err := server(t, f.deps()).Update(p.UpdateRequest{Urn: rolloutURN, ID: "db/etcd", State: state(nil),
		Inputs: inputs(map[string]property.Value{"versionHash": property.New("v2"),
			"plan": property.New([]property.Value{property.New("roll etcd-2"), property.New("roll etcd-1"), property.New("roll etcd-0")})})})
	require.Error(t, err)
	assert.Equal(t, []string{"roll etcd-1", "roll etcd-0", "re-lock partition at 3"}, planOf(resp.Properties))
}

// The state keeps the last snapshot a run stored (the rollback path) through later runs that needed none,
// and says when the last run went on without one.
func TestTheStateKeepsTheLastSnapshot(t *testing.T) {
	rec := &rollout.SnapshotRecord{Location: "file:///backups/db/etcd/20261205T020000Z.db", Member: "etcd-1"}
	rec.Revision, rec.Size, rec.SHA256 = 42, 4128, "ab12"
	var st RolloutState
	recordResult(&st, rollout.Result{Snapshot: rec})
	require.NotNil(t, st.Snapshot)
	assert.Equal(t, RolloutSnapshot{Location: rec.Location, Member: "etcd-1", Revision: 42, SizeBytes: 4128, Sha256: "ab12",
		TakenAt: "0001-01-01T00:00:00Z"}, *st.Snapshot)
	assert.Nil(t, st.SnapshotSkipped)

	recordResult(&st, rollout.Result{})
	require.NotNil(t, st.Snapshot, "a patch roll later keeps it")
	assert.Equal(t, rec.Location, st.Snapshot.Location)

	recordResult(&st, rollout.Result{SnapshotSkipped: "no snapshot stored: disk full"})
	require.NotNil(t, st.SnapshotSkipped)
	assert.Equal(t, "no snapshot stored: disk full", *st.SnapshotSkipped)
	assert.Contains(t, summary("db/etcd", rollout.Result{MembersRolled: []string{"etcd-2"}, SnapshotSkipped: "disk full"}),
		"NO snapshot before the point of no return (proceedWithoutSnapshot): disk full")
	assert.Contains(t, summary("db/etcd", rollout.Result{MembersRolled: []string{"etcd-2"}, Snapshot: rec}),
		"snapshot before the first restart: file:///backups/db/etcd/20261205T020000Z.db (revision 42, sha256 ab12)")
}
