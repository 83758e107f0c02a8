package provider

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/blang/semver"
	p "github.com/pulumi/pulumi-go-provider"
	"github.com/pulumi/pulumi-go-provider/integration"
	presource "github.com/pulumi/pulumi/sdk/v3/go/common/resource"
	"github.com/pulumi/pulumi/sdk/v3/go/common/tokens"
	"github.com/pulumi/pulumi/sdk/v3/go/property"
	"github.com/pulumi/pulumi/sdk/v3/go/pulumi"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
)

const componentURN = presource.URN("urn:pulumi:test::proj::etcd-rollout:index:EtcdRollingUpgrade::etcd")

// registrations records what a component registered with the mock monitor.
type registrations struct {
	mu   sync.Mutex
	byTy map[string]integration.MockResourceArgs
}

func (r *registrations) get(t *testing.T, typ string) integration.MockResourceArgs {
	t.Helper()
	r.mu.Lock()
	defer r.mu.Unlock()
	a, ok := r.byTy[typ]
	require.True(t, ok, "no %s registered; got %v", typ, r.byTy)
	return a
}

func (r *registrations) has(typ string) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	_, ok := r.byTy[typ]
	return ok
}

func constructServer(t *testing.T, readKube KubeProviderReader) (integration.Server, *registrations) {
	t.Helper()
	return constructServerWith(t, Deps{}, readKube)
}

func constructServerWith(t *testing.T, deps Deps, readKube KubeProviderReader) (integration.Server, *registrations) {
	t.Helper()
	regs := &registrations{byTy: map[string]integration.MockResourceArgs{}}
	prov, err := newProvider(deps, readKube)
	require.NoError(t, err)
	s, err := integration.NewServer(t.Context(), Name, semver.MustParse("0.1.0"), integration.WithProvider(prov),
		integration.WithMocks(&integration.MockResourceMonitor{
			NewResourceF: func(a integration.MockResourceArgs) (string, property.Map, error) {
				regs.mu.Lock()
				regs.byTy[string(a.TypeToken)] = a
				regs.mu.Unlock()
				out := a.Inputs
				if a.TypeToken == rolloutToken {
					out = out.Set("updateRevision", property.New("rev-b")).
						Set("membersRolled", property.New([]property.Value{property.New("etcd-2")})).
						Set("leaderTransfers", property.New(1.0)).
						Set("unplannedElections", property.New(0.0)).
						Set("finishedAt", property.New("2026-11-29T12:00:00Z"))
				}
				return a.Name + "-id", out, nil
			},
		}))
	require.NoError(t, err)
	return s, regs
}

func manifest() property.Value {
	return property.New(map[string]property.Value{
		"apiVersion": property.New("apps/v1"),
		"kind":       property.New("StatefulSet"),
		"metadata":   property.New(map[string]property.Value{"name": property.New("etcd")}),
		"spec": property.New(map[string]property.Value{
			"replicas":    property.New(3.0),
			"serviceName": property.New("etcd"),
			"template": property.New(map[string]property.Value{
				"spec": property.New(map[string]property.Value{
					"containers": property.New([]property.Value{property.New(map[string]property.Value{
						"name": property.New("etcd"), "image": property.New("etcd:v3.6.8"),
					})}),
				}),
			}),
		}),
	})
}

func componentInputs(extra map[string]property.Value) property.Map {
	m := map[string]property.Value{
		"stsName":     property.New("etcd"),
		"namespace":   property.New("db"),
		"serviceName": property.New("etcd"),
	}
	for k, v := range extra {
		m[k] = v
	}
	return property.NewMap(m)
}

func TestComponentDropIn(t *testing.T) {
	s, regs := constructServer(t, nil)
	resp, err := s.Construct(p.ConstructRequest{Urn: componentURN, Inputs: componentInputs(map[string]property.Value{
		"versionHash":     property.New("v1"),
		"cooldownSeconds": property.New(5.0),
		"tls": property.New(map[string]property.Value{
			"caFile": property.New("/tls/ca.crt"), "certFile": property.New("/tls/c.crt"), "keyFile": property.New("/tls/c.key"),
		}),
		"kubeconfig": property.New("/home/me/.kube/config"),
	}), CustomTimeouts: &presource.CustomTimeouts{Create: 1200, Update: 1200}})
	require.NoError(t, err)

	child := regs.get(t, rolloutToken)
	assert.Equal(t, "etcd", child.Name)
	in := child.Inputs
	assert.Equal(t, "v1", in.Get("versionHash").AsString())
	assert.Equal(t, 5.0, in.Get("cooldownSeconds").AsNumber())
	assert.Equal(t, "/tls/ca.crt", in.Get("tls").AsMap().Get("caFile").AsString())
	assert.True(t, in.Get("kubeconfig").Secret(), "credentials reach the child as a secret")
	assert.Equal(t, "/home/me/.kube/config", in.Get("kubeconfig").AsString())
	_, hasPort := in.GetOk("clientPort")
	assert.False(t, hasPort, "an omitted option stays omitted, so the engine default applies")
	require.NotNil(t, child.RegisterRPC.GetCustomTimeouts(), "customTimeouts reach the child")
	assert.Equal(t, "20m0s", child.RegisterRPC.GetCustomTimeouts().GetUpdate())
	assert.False(t, regs.has("kubernetes:apps/v1:StatefulSet"), "the drop-in shape owns no StatefulSet")
	assert.True(t, in.Get("stsMustExist").AsBool(), "with no dependsOnSts nothing creates the StatefulSet: it must exist")
	assert.Equal(t, Version, child.RegisterRPC.GetVersion(), "the Rollout asks for the component's own provider version")

	assert.Equal(t, "rev-b", resp.State.Get("updateRevision").AsString())
	assert.Equal(t, 1.0, resp.State.Get("leaderTransfers").AsNumber())
}

func TestComponentOwnsTheStatefulSet(t *testing.T) {
	s, regs := constructServer(t, nil)
	_, err := s.Construct(p.ConstructRequest{Urn: componentURN, Inputs: componentInputs(map[string]property.Value{
		"statefulSet": manifest(),
	})})
	require.NoError(t, err)

	sts := regs.get(t, "kubernetes:apps/v1:StatefulSet")
	meta := sts.Inputs.Get("metadata").AsMap()
	assert.Equal(t, "etcd", meta.Get("name").AsString())
	assert.Equal(t, "db", meta.Get("namespace").AsString(), "the namespace input fills the manifest")
	assert.Equal(t, "true", meta.Get("annotations").AsMap().Get("pulumi.com/skipAwait").AsString())
	assert.Equal(t, "true", meta.Get("annotations").AsMap().Get("pulumi.com/patchForce").AsString(), "the next apply re-locks whatever a killed run left")
	strategy := sts.Inputs.Get("spec").AsMap().Get("updateStrategy").AsMap()
	assert.Equal(t, "RollingUpdate", strategy.Get("type").AsString())
	assert.Equal(t, 3.0, strategy.Get("rollingUpdate").AsMap().Get("partition").AsNumber(), "partition = replicas")

	child := regs.get(t, rolloutToken)
	hash := child.Inputs.Get("versionHash").AsString()
	assert.Len(t, hash, 16, "versionHash is computed from the pod template")
	assert.Equal(t, []string{"urn:pulumi:stack::project::etcd-rollout:index:EtcdRollingUpgrade$kubernetes:apps/v1:StatefulSet::etcd"},
		child.RegisterRPC.GetDependencies(), "the rollout runs after the StatefulSet it owns is applied")
	assert.True(t, child.Inputs.Get("stsMustExist").AsBool(), "the owned StatefulSet has an ID: it exists")
}

func TestComponentReadsThePassedKubernetesProvider(t *testing.T) {
	var gotRef p.ProviderReference
	read := func(ctx *pulumi.Context, ref p.ProviderReference) (accessOutputs, error) {
		gotRef = ref
		kc := "apiVersion: v1\nkind: Config\n"
		return accessOutputs{
			Kubeconfig: pulumi.StringPtr(kc).ToStringPtrOutput(),
			Context:    pulumi.StringPtr("harness").ToStringPtrOutput(),
			Cluster:    pulumi.StringPtrOutput(pulumi.ToOutput((*string)(nil)).(pulumi.StringPtrOutput)),
		}, nil
	}
	s, regs := constructServer(t, read)
	ref := p.ProviderReference{Urn: "urn:pulumi:test::proj::pulumi:providers:kubernetes::k8s", ID: "prov-id"}
	_, err := s.Construct(p.ConstructRequest{Urn: componentURN,
		Inputs:    componentInputs(map[string]property.Value{"versionHash": property.New("v1"), "kubeconfig": property.New("/ignored")}),
		Providers: map[tokens.Package]p.ProviderReference{"kubernetes": ref},
	})
	require.NoError(t, err)
	assert.Equal(t, ref, gotRef)
	in := regs.get(t, rolloutToken).Inputs
	assert.Equal(t, "harness", in.Get("context").AsString())
	assert.Contains(t, in.Get("kubeconfig").AsString(), "kind: Config", "the provider's kubeconfig wins over the input")
	assert.True(t, in.Get("kubeconfig").Secret())
}

func TestComponentRejectsMissingVersionHash(t *testing.T) {
	s, _ := constructServer(t, nil)
	_, err := s.Construct(p.ConstructRequest{Urn: componentURN, Inputs: componentInputs(nil)})
	require.Error(t, err)
	assert.Contains(t, err.Error(), "versionHash is required unless statefulSet is given")
}

// The old call shape makes the StatefulSet the component's parent. A dependency on that parent would be
// expanded by the Go SDK into the parent's children, this component and the Rollout among them, and the
// Rollout's registration would wait for its own URN forever.
func TestComponentUnderItsStatefulSetDoesNotDeadlock(t *testing.T) {
	s, regs := constructServer(t, nil)
	done := make(chan error, 1)
	go func() {
		_, err := s.Construct(p.ConstructRequest{Urn: componentURN,
			Parent: "urn:pulumi:test::proj::kubernetes:apps/v1:StatefulSet::etcd",
			Inputs: componentInputs(map[string]property.Value{"versionHash": property.New("v1")})})
		done <- err
	}()
	select {
	case err := <-done:
		require.NoError(t, err)
		assert.True(t, regs.has(rolloutToken))
	case <-time.After(30 * time.Second):
		t.Fatal("Construct under a parent did not return")
	}
}

// A StatefulSet the component owns is compared with the live one before it is applied: a change to a locked
// field (here the claim templates the live one has and the manifest drops) fails Construct, in preview too,
// with nothing registered that pulumi-kubernetes would replace; the same manifest as the live one goes through.
func TestComponentRefusesALockedFieldChange(t *testing.T) {
	live := liveStatefulSet()
	live.Spec.ServiceName = "etcd"
	for _, tt := range []struct {
		name    string
		claims  bool
		wantErr string
	}{
		{name: "the manifest drops the live claim templates", claims: true,
			wantErr: "StatefulSet db/etcd: spec.volumeClaimTemplates cannot change in place, and replacing the StatefulSet would delete every etcd member at once; nothing was changed"},
		{name: "the manifest keeps every locked field"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			l := live.DeepCopy()
			l.Spec.Selector = nil
			if !tt.claims {
				l.Spec.VolumeClaimTemplates = nil
			}
			var asked ClusterAccess
			readLive := func(_ context.Context, access ClusterAccess, namespace, name string) (*appsv1.StatefulSet, error) {
				asked = access
				assert.Equal(t, "db/etcd", namespace+"/"+name)
				return l, nil
			}
			s, regs := constructServerWith(t, Deps{ReadLive: readLive}, nil)
			_, err := s.Construct(p.ConstructRequest{Urn: componentURN, Inputs: componentInputs(map[string]property.Value{
				"statefulSet": manifest(), "kubeconfig": property.New("/home/me/.kube/config"),
			})})
			assert.Equal(t, "/home/me/.kube/config", asked.Kubeconfig, "the live StatefulSet is read where the component applies it")
			if tt.wantErr == "" {
				require.NoError(t, err)
				assert.True(t, regs.has("kubernetes:apps/v1:StatefulSet"))
				return
			}
			require.Error(t, err)
			assert.Contains(t, err.Error(), tt.wantErr)
			assert.False(t, regs.has("kubernetes:apps/v1:StatefulSet"), "nothing pulumi-kubernetes would replace is registered")
			assert.False(t, regs.has(rolloutToken))
		})
	}
}
