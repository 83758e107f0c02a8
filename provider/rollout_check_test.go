package provider

import (
	"fmt"
	"testing"

	p "github.com/pulumi/pulumi-go-provider"
	"github.com/pulumi/pulumi/sdk/v3/go/property"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/etcd-rollout/pulumi-etcd-rollout/rollout"
)

func TestCheckRejectsBadInputWithFieldMessages(t *testing.T) {
	tls := func(ca, cert, key string) property.Value {
		m := map[string]property.Value{}
		for k, v := range map[string]string{"caFile": ca, "certFile": cert, "keyFile": key} {
			m[k] = property.New(v)
		}
		return property.New(property.NewMap(m))
	}
	tests := []struct {
		name      string
		overrides map[string]property.Value
		property  string
		reason    string
	}{
		{"upper-case name", map[string]property.Value{"stsName": property.New("Etcd")}, "stsName", `stsName "Etcd" is not a valid StatefulSet name`},
		{"name too long", map[string]property.Value{"stsName": property.New("e123456789012345678901234567890123456789012345678901234")}, "stsName", "at most 52"},
		{"bad namespace", map[string]property.Value{"namespace": property.New("db_1")}, "namespace", `namespace "db_1" is not a valid namespace name`},
		{"bad service", map[string]property.Value{"serviceName": property.New("1etcd")}, "serviceName", `serviceName "1etcd" is not a valid Service name`},
		{"port zero", map[string]property.Value{"clientPort": property.New(0.0)}, "clientPort", "clientPort 0 is out of range"},
		{"port too big", map[string]property.Value{"clientPort": property.New(70000.0)}, "clientPort", "clientPort 70000 is out of range"},
		{"empty hash", map[string]property.Value{"versionHash": property.New("  ")}, "versionHash", "versionHash is empty"},
		{"negative cooldown", map[string]property.Value{"cooldownSeconds": property.New(-1.0)}, "cooldownSeconds", "must be 0 or more"},
		{"zero ready timeout", map[string]property.Value{"readyTimeoutSeconds": property.New(0.0)}, "readyTimeoutSeconds", "must be a positive number"},
		{"unknown failure policy", map[string]property.Value{"onFailure": property.New("retry")}, "onFailure", `onFailure is "retry": it must be "revert"`},
		{"negative health timeout", map[string]property.Value{"healthTimeoutSeconds": property.New(-5.0)}, "healthTimeoutSeconds", "must be a positive number"},
		{"snapshot destination with a credential", map[string]property.Value{"snapshotTo": property.New("s3://k:s@rollbacks")}, "snapshotTo", "snapshotTo is refused: snapshot destination refused: the URL carries user info"},
		{"snapshot destination of unknown scheme", map[string]property.Value{"snapshotTo": property.New("ftp://host/dir")}, "snapshotTo", `scheme "ftp" is not one of file, s3, gs, azblob`},
		{"half tls", map[string]property.Value{"tls": tls("/tls/ca.crt", "", "")}, "tls", "missing tls.certFile, tls.keyFile"},
		{"missing tls field", map[string]property.Value{"tls": property.New(property.NewMap(map[string]property.Value{"caFile": property.New("/tls/ca.crt")}))}, "tls", "Missing required field 'certFile'"},
		{"relative tls path", map[string]property.Value{"tls": tls("ca.crt", "/tls/c.crt", "/tls/c.key")}, "tls.caFile", "must be an absolute path"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := &fakeCluster{uid: "uid-1", state: healthyState("rev-a", 0)}
			resp, err := server(t, f.deps()).Check(p.CheckRequest{Urn: rolloutURN, Inputs: inputs(tt.overrides)})
			require.NoError(t, err)
			require.Len(t, resp.Failures, 1, "failures: %v", resp.Failures)
			assert.Equal(t, tt.property, resp.Failures[0].Property)
			assert.Contains(t, resp.Failures[0].Reason, tt.reason)
			assert.Empty(t, f.configs, "nothing may be observed when the input is bad")
		})
	}
}

func TestCheckSkipsUnknownInputs(t *testing.T) {
	f := &fakeCluster{uid: "uid-1", state: healthyState("rev-a", 0)}
	resp, err := server(t, f.deps()).Check(p.CheckRequest{Urn: rolloutURN, Inputs: inputs(map[string]property.Value{
		"versionHash": property.New(property.Computed),
		"kubeconfig":  property.New(property.Computed),
	})})
	require.NoError(t, err)
	assert.Empty(t, resp.Failures)
	assert.True(t, resp.Inputs.Get("versionHash").IsComputed(), "an unknown versionHash stays unknown")
	assert.Empty(t, f.accesses, "the cluster is not read while the kubeconfig is unknown")
}

func TestCheckWritesThePlan(t *testing.T) {
	tests := []struct {
		name     string
		olds     property.Map
		news     property.Map
		state    func() rollout.ClusterState
		wantPlan []string
	}{
		{
			name:  "template change: every member rolls, the leader moves off each before it restarts",
			olds:  inputs(nil),
			news:  inputs(map[string]property.Value{"versionHash": property.New("v2")}),
			state: func() rollout.ClusterState { return healthyState("rev-a", 2) },
			wantPlan: []string{
				"move leader etcd-2 -> etcd-0", "roll etcd-2", "roll etcd-1",
				"move leader etcd-0 -> etcd-2", "roll etcd-0", "re-lock partition at 3",
			},
		},
		{
			name: "same versionHash, a member left outdated by a stopped run",
			olds: inputs(nil),
			news: inputs(nil),
			state: func() rollout.ClusterState {
				s := healthyState("rev-b", 0)
				s.Members[0].Revision = "rev-a"
				return s
			},
			wantPlan: []string{"move leader etcd-0 -> etcd-2", "roll etcd-0", "re-lock partition at 3"},
		},
		{
			name:     "nothing to do",
			olds:     inputs(nil),
			news:     inputs(nil),
			state:    func() rollout.ClusterState { return healthyState("rev-a", 0) },
			wantPlan: nil,
		},
		{
			name:     "a program-supplied plan is replaced",
			olds:     inputs(nil),
			news:     inputs(map[string]property.Value{"plan": property.New([]property.Value{property.New("roll everything")})}),
			state:    func() rollout.ClusterState { return healthyState("rev-a", 0) },
			wantPlan: nil,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := &fakeCluster{uid: "uid-1", state: tt.state()}
			resp, err := server(t, f.deps()).Check(p.CheckRequest{Urn: rolloutURN, State: tt.olds, Inputs: tt.news})
			require.NoError(t, err)
			require.Empty(t, resp.Failures)
			assert.Equal(t, tt.wantPlan, planOf(resp.Inputs))
			assert.True(t, resp.Inputs.Get("kubeconfig").Secret(), "kubeconfig stays secret")
		})
	}
}

func TestCheckMissingStatefulSet(t *testing.T) {
	t.Run("existing rollout: bad input", func(t *testing.T) {
		f := &fakeCluster{}
		resp, err := server(t, f.deps()).Check(p.CheckRequest{Urn: rolloutURN, State: inputs(nil), Inputs: inputs(nil)})
		require.NoError(t, err)
		require.Len(t, resp.Failures, 1)
		assert.Equal(t, "stsName", resp.Failures[0].Property)
		assert.Contains(t, resp.Failures[0].Reason, "StatefulSet db/etcd was not found on the cluster")
	})
	t.Run("new rollout: the same update may create it", func(t *testing.T) {
		f := &fakeCluster{}
		resp, err := server(t, f.deps()).Check(p.CheckRequest{Urn: rolloutURN, Inputs: inputs(nil)})
		require.NoError(t, err)
		assert.Empty(t, resp.Failures)
	})
}

func planOf(m property.Map) []string {
	v, ok := m.GetOk("plan")
	if !ok || !v.IsArray() {
		return nil
	}
	var out []string
	for _, e := range v.AsArray().AsSlice() {
		out = append(out, e.AsString())
	}
	return out
}

// A roll the engine refuses before anything is touched (members whose data dies with their pod that cannot be
// replaced safely; pods that remove their own member; peers that would not talk to a restarted member) fails the preview on stsName with the engine's reason: a
// warning alone would let `pulumi up` start and fail at once.
func TestCheckRefusesARollTheEngineRefuses(t *testing.T) {
	tests := []struct {
		name    string
		refusal error
	}{
		{"members whose data dies with their pod", fmt.Errorf("%w: the template starts etcd with --initial-cluster-state=new", rollout.ErrDataDiesWithPod)},
		{"pods that remove their own member", fmt.Errorf("%w: etcd-2's pod runs prestop.sh; set acceptPreStopMemberRemoval", rollout.ErrPreStopRemovesMember)},
		{"a peer URL built from the pod's IP", fmt.Errorf("%w: the template advertises etcd's peer URL from the pod's IP", rollout.ErrPeerURLFollowsPod)},
		{"an update strategy that takes several members down", fmt.Errorf("%w: rollingUpdate.maxUnavailable 2", rollout.ErrUnsafeStrategy)},
	}
	for _, refusal := range []error{
		fmt.Errorf("%w: etcd-2 (peer): etcd-0 refuses its new certificate", rollout.ErrPeerTrust),
		fmt.Errorf("%w: etcd-2 (client): its new trust (CN=etcd-ca-2026) refuses the engine's certificate", rollout.ErrClientTrust),
	} {
		t.Run("a restart whose peers or clients would refuse its certificates: "+refusal.Error(), func(t *testing.T) {
			f := &fakeCluster{uid: "uid-1", state: healthyState("rev-a", 0), trustErr: refusal}
			resp, err := server(t, f.deps()).Check(p.CheckRequest{Urn: rolloutURN, State: inputs(nil),
				Inputs: inputs(map[string]property.Value{"versionHash": property.New("v2")})})
			require.NoError(t, err)
			require.Len(t, resp.Failures, 1, "failures: %v", resp.Failures)
			assert.Equal(t, "stsName", resp.Failures[0].Property)
			assert.Contains(t, resp.Failures[0].Reason, refusal.Error())
		})
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := &fakeCluster{uid: "uid-1", state: healthyState("rev-a", 0)}
			deps := f.deps()
			deps.Plan = func(rollout.ClusterState, rollout.LeaderPolicy) (rollout.Plan, error) {
				return rollout.Plan{}, tt.refusal
			}
			resp, err := server(t, deps).Check(p.CheckRequest{Urn: rolloutURN, State: inputs(nil),
				Inputs: inputs(map[string]property.Value{"versionHash": property.New("v2")})})
			require.NoError(t, err)
			require.Len(t, resp.Failures, 1, "failures: %v", resp.Failures)
			assert.Equal(t, "stsName", resp.Failures[0].Property)
			assert.Contains(t, resp.Failures[0].Reason, tt.refusal.Error())
			assert.Zero(t, f.runs, "nothing ran")
		})
	}
}
