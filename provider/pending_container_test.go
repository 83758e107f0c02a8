package provider

import (
	"context"
	"testing"

	p "github.com/pulumi/pulumi-go-provider"
	"github.com/pulumi/pulumi/sdk/v3/go/property"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	"k8s.io/client-go/rest"

	"github.com/etcd-rollout/pulumi-etcd-rollout/rollout"
)

// The component passes the etcd container it is about to apply, so a preview of a template change judges
// the new template before the StatefulSet changes: its version path (with etcd's downgrade answer) and its
// flags. Secrets stay out: only plain ETCD_* variables are passed.
func TestPreviewJudgesTheTemplateAboutToBeApplied(t *testing.T) {
	manifest := func(image string, args ...string) map[string]any {
		return map[string]any{"spec": map[string]any{"template": map[string]any{"spec": map[string]any{"containers": []any{
			map[string]any{"name": "etcd", "image": image, "command": []any{"etcd"}, "args": toAny(args), "env": []any{
				map[string]any{"name": "ETCD_SNAPSHOT_COUNT", "value": "5000"},
				map[string]any{"name": "TOKEN", "value": "s3cret"},
				map[string]any{"name": "ETCD_PEER_KEY", "valueFrom": map[string]any{"secretKeyRef": map[string]any{"name": "x", "key": "y"}}},
			}},
		}}}}}
	}
	live := healthyState("rev-a", 0)
	live.ClusterVersion = "3.6.0"
	for i := range live.Members {
		live.Members[i].Image, live.Members[i].ServerVersion, live.Members[i].StorageVersion = "registry.k8s.io/etcd:3.6.8-0", "3.6.8", "3.6.0"
	}
	live.TemplateImage = "registry.k8s.io/etcd:3.6.8-0"
	for _, tc := range []struct {
		name        string
		manifest    map[string]any
		wantPlan0   string
		wantFailure string
	}{
		{name: "a downgrade", manifest: manifest("registry.k8s.io/etcd:3.5.35-0", "--name=$(POD_NAME)"),
			wantPlan0: "etcd 3.6.8 → 3.5.35 (downgrade to 3.5: validate ok; enable before etcd-2; cluster version 3.6 → 3.5)"},
		{name: "a downgrade with a flag 3.5 does not accept", manifest: manifest("registry.k8s.io/etcd:3.5.35-0", "--feature-gates=InitialCorruptCheck=true"),
			wantFailure: "etcd 3.5 does not accept --feature-gates"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			pending, err := pendingEtcdContainer(tc.manifest)
			require.NoError(t, err)
			assert.NotContains(t, pending, "s3cret", "only ETCD_* variables")
			assert.NotContains(t, pending, "secretKeyRef")
			f := &fakeCluster{uid: "uid-1", state: live}
			deps := f.deps()
			deps.ReadFacts = func(context.Context, *rest.Config, string, string) (clusterFacts, error) {
				return clusterFacts{StatefulSet: etcdSts(nil), LeaseHeld: false,
					MemberImages: map[string]string{"etcd-0": "registry.k8s.io/etcd:3.6.8-0", "etcd-1": "registry.k8s.io/etcd:3.6.8-0", "etcd-2": "registry.k8s.io/etcd:3.6.8-0"}}, nil
			}
			resp, err := server(t, deps).Check(p.CheckRequest{Urn: rolloutURN, State: inputs(nil),
				Inputs: inputs(map[string]property.Value{"versionHash": property.New("v2"), "etcdContainer": property.New(pending)})})
			require.NoError(t, err)
			if tc.wantFailure != "" {
				require.Len(t, resp.Failures, 1, "%v", resp.Failures)
				assert.Contains(t, resp.Failures[0].Reason, tc.wantFailure)
				return
			}
			require.Empty(t, resp.Failures)
			plan := planOf(resp.Inputs)
			require.NotEmpty(t, plan)
			assert.Equal(t, tc.wantPlan0, plan[0])
		})
	}
}

func toAny(ss []string) []any {
	out := make([]any, len(ss))
	for i, s := range ss {
		out[i] = s
	}
	return out
}

// After a stopped `pulumi up`, Pulumi still holds the old versionHash as the old input, but the template of
// the new one is live and some members run it: the preview plans only the members left, because the last
// rollout published the live updateRevision as the target of this versionHash.
func TestPreviewAfterAStoppedUpPlansOnlyTheMembersLeft(t *testing.T) {
	live := healthyState("rev-b", 0)
	live.CurrentRevision = "rev-a"
	live.Members[0].Revision, live.Members[1].Revision = "rev-a", "rev-a"
	sts := etcdSts(func(s *appsv1.StatefulSet) { s.Status.UpdateRevision = "rev-b" })
	for _, tc := range []struct {
		name    string
		applied rollout.RolloutStatus
		want    []string
	}{
		// etcd-2, which the stopped run left on rev-b, proves itself again before anything restarts.
		{name: "the stopped run published this versionHash", applied: rollout.RolloutStatus{TemplateVersion: "v2", TargetRevision: "rev-b"},
			want: []string{"wait for etcd-2 to be healthy", "roll etcd-1", "move leader etcd-0 -> etcd-2", "roll etcd-0", "re-lock partition at 3"}},
		{name: "it published another versionHash: the template is about to change", applied: rollout.RolloutStatus{TemplateVersion: "v1", TargetRevision: "rev-b"},
			want: []string{"roll etcd-2", "roll etcd-1", "move leader etcd-0 -> etcd-2", "roll etcd-0", "re-lock partition at 3"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := &fakeCluster{uid: "uid-1", state: live}
			deps := f.deps()
			deps.ReadFacts = func(context.Context, *rest.Config, string, string) (clusterFacts, error) {
				return clusterFacts{StatefulSet: sts, Applied: tc.applied}, nil
			}
			resp, err := server(t, deps).Check(p.CheckRequest{Urn: rolloutURN, State: inputs(nil),
				Inputs: inputs(map[string]property.Value{"versionHash": property.New("v2")})})
			require.NoError(t, err)
			require.Empty(t, resp.Failures)
			assert.Equal(t, tc.want, planOf(resp.Inputs))
		})
	}
}

// The component passes the new template's probes too (without HTTP headers, which can carry a token), and a
// preview of a template change warns about its probes, not the live template's: a probe the change removes
// is not warned about, one it adds is.
func TestPreviewJudgesThePendingTemplatesProbes(t *testing.T) {
	withProbe := map[string]any{"spec": map[string]any{"template": map[string]any{"spec": map[string]any{"containers": []any{
		map[string]any{"name": "etcd", "image": "registry.k8s.io/etcd:3.6.8-0", "command": []any{"etcd"},
			"livenessProbe": map[string]any{"httpGet": map[string]any{"path": "/health", "port": 2381,
				"httpHeaders": []any{map[string]any{"name": "Authorization", "value": "Bearer s3cret"}}}}},
	}}}}}
	without := map[string]any{"spec": map[string]any{"template": map[string]any{"spec": map[string]any{"containers": []any{
		map[string]any{"name": "etcd", "image": "registry.k8s.io/etcd:3.6.8-0", "command": []any{"etcd"}},
	}}}}}
	liveWarning := []rollout.ProbeFinding{{Kind: "LivenessNeedsQuorum", Probe: "livenessProbe", Check: "httpGet /health (live)",
		Why: "it fails on every member while the cluster has no quorum", Instead: "httpGet /livez"}}
	for _, tc := range []struct {
		name     string
		manifest map[string]any
		live     []rollout.ProbeFinding
		warned   bool
	}{
		{name: "the change adds a probe that needs quorum", manifest: withProbe, warned: true},
		{name: "the change removes the live one", manifest: without, live: liveWarning, warned: false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			logs := recordLogs(t)
			pending, err := pendingEtcdContainer(tc.manifest)
			require.NoError(t, err)
			assert.NotContains(t, pending, "s3cret", "no probe header reaches the Rollout's inputs")
			s := healthyState("rev-a", 0)
			s.ProbeWarnings = tc.live
			f := &fakeCluster{uid: "uid-1", state: s}
			resp, err := server(t, f.deps()).Check(p.CheckRequest{Urn: rolloutURN, State: inputs(nil),
				Inputs: inputs(map[string]property.Value{"versionHash": property.New("v2"), "etcdContainer": property.New(pending)})})
			require.NoError(t, err)
			require.Empty(t, resp.Failures)
			assert.Equal(t, tc.warned, containsAny(logs.messages(), "livenessProbe httpGet"), "warnings: %q", logs.messages())
		})
	}
}
