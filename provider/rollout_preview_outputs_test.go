package provider

import (
	"testing"

	p "github.com/pulumi/pulumi-go-provider"
	"github.com/pulumi/pulumi/sdk/v3/go/property"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// rolloutOutputs are the outputs only a run of the rollout sets.
var rolloutOutputs = []string{"statefulSetUid", "updateRevision", "membersRolled", "leaderTransfers",
	"unplannedElections", "finishedAt", "complete"}

func TestPreviewOutputsAreUnknown(t *testing.T) {
	pending := property.New([]property.Value{property.New("roll etcd-2")})
	f := &fakeCluster{uid: "uid-1", state: healthyState("rev-a", 0)}
	s := server(t, f.deps())
	tests := []struct {
		name    string
		preview func() (property.Map, error)
	}{
		{"create", func() (property.Map, error) {
			resp, err := s.Create(p.CreateRequest{Urn: rolloutURN, Properties: inputs(nil), DryRun: true})
			return resp.Properties, err
		}},
		{"update for a new versionHash", func() (property.Map, error) {
			resp, err := s.Update(p.UpdateRequest{Urn: rolloutURN, ID: "db/etcd", State: state(nil), DryRun: true,
				Inputs: inputs(map[string]property.Value{"versionHash": property.New("v2")})})
			return resp.Properties, err
		}},
		{"update that finishes a stopped rollout", func() (property.Map, error) {
			resp, err := s.Update(p.UpdateRequest{Urn: rolloutURN, ID: "db/etcd", State: state(nil), DryRun: true,
				Inputs: inputs(map[string]property.Value{"plan": pending})})
			return resp.Properties, err
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			out, err := tt.preview()
			require.NoError(t, err)
			for _, key := range rolloutOutputs {
				v, ok := out.GetOk(key)
				if assert.True(t, ok, "%s is in the preview's outputs", key) {
					assert.True(t, v.IsComputed(), "%s is unknown in a preview, not %v", key, v)
				}
			}
			assert.Equal(t, "etcd", out.Get("stsName").AsString(), "inputs mirrored as outputs stay known")
		})
	}
	assert.Zero(t, f.runs)
}
