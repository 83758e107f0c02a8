package provider

import (
	"testing"

	p "github.com/pulumi/pulumi-go-provider"
	"github.com/pulumi/pulumi/sdk/v3/go/property"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// state is a Rollout's stored outputs after a complete run on StatefulSet uid-1.
func state(overrides map[string]property.Value) property.Map {
	m := inputs(nil).AsMap()
	delete(m, "kubeconfig")
	m["statefulSetUid"] = property.New("uid-1")
	m["updateRevision"] = property.New("rev-a")
	m["membersRolled"] = property.New([]property.Value{})
	m["leaderTransfers"] = property.New(0.0)
	m["unplannedElections"] = property.New(0.0)
	m["finishedAt"] = property.New("2026-11-29T12:00:00Z")
	m["complete"] = property.New(true)
	m["plan"] = property.New([]property.Value{})
	for k, v := range overrides {
		m[k] = v
	}
	return property.NewMap(m)
}

func TestDiff(t *testing.T) {
	plan := property.New([]property.Value{property.New("roll etcd-2")})
	tests := []struct {
		name    string
		news    property.Map
		uid     string
		want    map[string]p.DiffKind
		wantErr string
	}{
		{"nothing changed", inputs(nil), "uid-1", map[string]p.DiffKind{}, ""},
		{"new versionHash rolls", inputs(map[string]property.Value{"versionHash": property.New("v2"), "plan": plan}), "uid-1",
			map[string]p.DiffKind{"versionHash": p.Update, "plan": p.Update}, ""},
		{"outdated members on the live cluster with the same versionHash", inputs(map[string]property.Value{"plan": plan}), "uid-1",
			map[string]p.DiffKind{"plan": p.Update}, ""},
		{"kubeconfig, context and cluster changes are not a diff", inputs(map[string]property.Value{
			"kubeconfig": property.New("/other/kubeconfig").WithSecret(true),
			"context":    property.New("other"), "cluster": property.New("other"),
		}), "uid-1", map[string]p.DiffKind{}, ""},
		{"accepting preStop member removal is not a diff: it changes what a run may do, not the cluster", inputs(map[string]property.Value{
			"acceptPreStopMemberRemoval": property.New(true),
		}), "uid-1", map[string]p.DiffKind{}, ""},
		{"settings are updates", inputs(map[string]property.Value{"cooldownSeconds": property.New(5.0)}), "uid-1",
			map[string]p.DiffKind{"cooldownSeconds": p.Update}, ""},
		{"another StatefulSet is a replacement", inputs(map[string]property.Value{"stsName": property.New("etcd-b")}), "uid-2",
			map[string]p.DiffKind{"stsName": p.UpdateReplace}, ""},
		{"another cluster is refused", inputs(nil), "uid-other", nil, "has UID uid-other, but this rollout was first run on UID uid-1"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := &fakeCluster{uid: tt.uid}
			resp, err := server(t, f.deps()).Diff(p.DiffRequest{Urn: rolloutURN, ID: "db/etcd", State: state(nil), Inputs: tt.news})
			if tt.wantErr != "" {
				require.Error(t, err)
				assert.Contains(t, err.Error(), tt.wantErr)
				return
			}
			require.NoError(t, err)
			got := map[string]p.DiffKind{}
			for k, d := range resp.DetailedDiff {
				got[k] = d.Kind
			}
			assert.Equal(t, tt.want, got)
			assert.Equal(t, len(tt.want) > 0, resp.HasChanges)
		})
	}
}
