package provider

import (
	"strings"
	"testing"
	"time"

	p "github.com/pulumi/pulumi-go-provider"
	"github.com/pulumi/pulumi/sdk/v3/go/property"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/etcd-rollout/pulumi-etcd-rollout/rollout"
)

// A run whose member failed and was reverted keeps the failure in the state, and the next preview warns
// about it next to the plan.
func TestFailedMemberIsRecordedAndWarnedAboutInTheNextPreview(t *testing.T) {
	logs := recordLogs(t)
	at := time.Date(2026, 12, 1, 15, 4, 5, 0, time.UTC)
	failure := &rollout.Failure{Pod: "etcd-2", Revision: "rev-b", Gate: rollout.GateEtcdHealth,
		LastSeen: "connection refused", At: at, RevertedTo: "rev-a"}
	f := &fakeCluster{uid: "uid-1", state: healthyState("rev-b", 0),
		result: rollout.Result{UpdateRevision: "rev-b", Failure: failure},
		runErr: &rollout.RevertedError{Pod: "etcd-2", From: "rev-b", To: "rev-a", Cause: &rollout.GateTimeoutError{Pod: "etcd-2", Gate: rollout.GateEtcdHealth}}}
	s := server(t, f.deps())
	resp, err := s.Update(p.UpdateRequest{Urn: rolloutURN, ID: "db/etcd", State: state(nil),
		Inputs: inputs(map[string]property.Value{"versionHash": property.New("v2")})})
	require.Error(t, err)
	last := resp.Properties.Get("lastFailure").AsMap()
	assert.Equal(t, "etcd-2", last.Get("member").AsString())
	assert.Equal(t, "rev-b", last.Get("revision").AsString())
	assert.Equal(t, "rev-a", last.Get("revertedTo").AsString())
	assert.Equal(t, "2026-12-01T15:04:05Z", last.Get("at").AsString())

	_, err = s.Diff(p.DiffRequest{Urn: rolloutURN, ID: "db/etcd", State: resp.Properties,
		Inputs: inputs(map[string]property.Value{"versionHash": property.New("v2"), "plan": property.New([]property.Value{property.New("roll etcd-2")})})})
	require.NoError(t, err)
	assert.Contains(t, strings.Join(logs.messages(), "\n"), "last attempt of revision rev-b failed on etcd-2 at 2026-12-01T15:04:05Z (the etcd health gate: connection refused); it was reverted to rev-a")
}

func TestRecordFailure(t *testing.T) {
	earlier := &RolloutFailure{Member: "etcd-1", Revision: "rev-x"}
	tests := []struct {
		name     string
		res      rollout.Result
		complete bool
		want     *RolloutFailure
	}{
		{name: "a complete run forgets the failure", res: rollout.Result{}, complete: true},
		{name: "a run that stopped for another reason keeps the earlier one", res: rollout.Result{}, want: earlier},
		{name: "a new failure replaces it", res: rollout.Result{Failure: &rollout.Failure{Pod: "etcd-2", Revision: "rev-b",
			Gate: rollout.GatePodReady, RevertError: "past the point of no return"}},
			want: &RolloutFailure{Member: "etcd-2", Revision: "rev-b", Gate: rollout.GatePodReady, At: "0001-01-01T00:00:00Z",
				RevertError: "past the point of no return"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			st := RolloutState{LastFailure: earlier}
			recordFailure(&st, tt.res, tt.complete)
			assert.Equal(t, tt.want, st.LastFailure)
		})
	}
}

func TestInputsThatDecideWhatARunMayDo(t *testing.T) {
	stop := "stop"
	assert.Equal(t, rollout.FailureStop, engineConfig(RolloutArgs{StsName: "etcd", Namespace: "db", ServiceName: "etcd", OnFailure: &stop}, "").OnFailure)
	assert.Equal(t, rollout.FailureRevert, engineConfig(RolloutArgs{StsName: "etcd", Namespace: "db", ServiceName: "etcd"}, "").OnFailure)
	accept := true
	assert.True(t, engineConfig(RolloutArgs{StsName: "etcd", Namespace: "db", ServiceName: "etcd", AcceptPreStopMemberRemoval: &accept}, "").AcceptPreStopMemberRemoval)
	assert.False(t, engineConfig(RolloutArgs{StsName: "etcd", Namespace: "db", ServiceName: "etcd"}, "").AcceptPreStopMemberRemoval)
}
