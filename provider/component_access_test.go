package provider

import (
	"testing"

	p "github.com/pulumi/pulumi-go-provider"
	pconfig "github.com/pulumi/pulumi/sdk/v3/go/common/resource/config"
	"github.com/pulumi/pulumi/sdk/v3/go/common/tokens"
	"github.com/pulumi/pulumi/sdk/v3/go/property"
	"github.com/pulumi/pulumi/sdk/v3/go/pulumi"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// wantAccess is what the Rollout must receive; "" means the input is absent or null.
type wantAccess struct {
	kubeconfig, context, cluster string
	contextSecret                bool
}

// stringOf reads an input that may be absent, null, or a (secret) string.
func stringOf(m property.Map, key string) string {
	v, ok := m.GetOk(key)
	if !ok || !v.IsString() {
		return ""
	}
	return v.AsString()
}

// The Rollout reaches the cluster the StatefulSet is applied to: the passed kubernetes provider, else the
// kubeconfig input, else the stack config pulumi-kubernetes' default provider reads, else client-go's rules.
func TestComponentClusterAccessPrecedence(t *testing.T) {
	const (
		providerKC = "apiVersion: v1\nkind: Config\n# from the provider\n"
		stackKC    = "/stack/kubeconfig"
	)
	stackConfig := map[pconfig.Key]string{
		pconfig.MustParseKey("kubernetes:kubeconfig"): stackKC,
		pconfig.MustParseKey("kubernetes:context"):    "stack-ctx",
		pconfig.MustParseKey("kubernetes:cluster"):    "stack-cluster",
		pconfig.MustParseKey("proj:unrelated"):        "x",
	}
	secretKeys := []pconfig.Key{pconfig.MustParseKey("kubernetes:kubeconfig")}
	readProvider := func(*pulumi.Context, p.ProviderReference) (accessOutputs, error) {
		return accessOutputs{
			Kubeconfig: pulumi.StringPtr(providerKC).ToStringPtrOutput(),
			Context:    pulumi.StringPtr("provider-ctx").ToStringPtrOutput(),
			Cluster:    pulumi.ToOutput((*string)(nil)).(pulumi.StringPtrOutput),
		}, nil
	}
	providerRef := map[tokens.Package]p.ProviderReference{
		"kubernetes": {Urn: "urn:pulumi:test::proj::pulumi:providers:kubernetes::k8s", ID: "prov-id"},
	}

	tests := []struct {
		name       string
		providers  map[tokens.Package]p.ProviderReference
		inputs     map[string]property.Value
		config     map[pconfig.Key]string
		secretKeys []pconfig.Key
		want       wantAccess
	}{
		{
			name:      "the passed provider beats the kubeconfig input and the stack config",
			providers: providerRef,
			inputs:    map[string]property.Value{"kubeconfig": property.New("/input/kubeconfig"), "context": property.New("input-ctx")},
			config:    stackConfig, secretKeys: secretKeys,
			want: wantAccess{kubeconfig: providerKC, context: "provider-ctx"},
		},
		{
			name:   "the kubeconfig input beats the stack config, which adds nothing to it",
			inputs: map[string]property.Value{"kubeconfig": property.New("/input/kubeconfig"), "context": property.New("input-ctx")},
			config: stackConfig, secretKeys: secretKeys,
			want: wantAccess{kubeconfig: "/input/kubeconfig", context: "input-ctx"},
		},
		{
			name:   "no provider and no kubeconfig input: the default provider's stack config",
			config: stackConfig, secretKeys: secretKeys,
			want: wantAccess{kubeconfig: stackKC, context: "stack-ctx", cluster: "stack-cluster"},
		},
		{
			name:   "a secret kubernetes:context stays a secret",
			config: stackConfig,
			secretKeys: []pconfig.Key{pconfig.MustParseKey("kubernetes:kubeconfig"),
				pconfig.MustParseKey("kubernetes:context")},
			want: wantAccess{kubeconfig: stackKC, context: "stack-ctx", cluster: "stack-cluster", contextSecret: true},
		},
		{
			name:   "a context input overrides kubernetes:context on the stack's kubeconfig",
			inputs: map[string]property.Value{"context": property.New("input-ctx")},
			config: stackConfig, secretKeys: secretKeys,
			want: wantAccess{kubeconfig: stackKC, context: "input-ctx", cluster: "stack-cluster"},
		},
		{
			name: "a plain (not secret) kubernetes:kubeconfig still reaches the Rollout as a secret",
			config: map[pconfig.Key]string{
				pconfig.MustParseKey("kubernetes:kubeconfig"): stackKC,
				pconfig.MustParseKey("kubernetes:context"):    "",
			},
			want: wantAccess{kubeconfig: stackKC},
		},
		{
			name: "nothing configured: client-go's default loading rules",
			want: wantAccess{},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, regs := constructServer(t, readProvider)
			inputs := map[string]property.Value{"versionHash": property.New("v1")}
			for k, v := range tt.inputs {
				inputs[k] = v
			}
			_, err := s.Construct(p.ConstructRequest{Urn: componentURN, Inputs: componentInputs(inputs),
				Providers: tt.providers, Config: tt.config, ConfigSecretKeys: tt.secretKeys})
			require.NoError(t, err)

			in := regs.get(t, rolloutToken).Inputs
			assert.Equal(t, tt.want.kubeconfig, stringOf(in, "kubeconfig"))
			assert.Equal(t, tt.want.context, stringOf(in, "context"))
			assert.Equal(t, tt.want.cluster, stringOf(in, "cluster"))
			if tt.want.kubeconfig != "" {
				assert.True(t, in.Get("kubeconfig").Secret(), "the kubeconfig reaches the Rollout only as a secret")
			}
			if tt.want.context != "" {
				assert.Equal(t, tt.want.contextSecret, in.Get("context").Secret(), "context secret")
			}
		})
	}
}

// An owned StatefulSet with no provider and no kubeconfig input is applied by the default kubernetes
// provider, whose stack config the Rollout now shares: the component makes no provider of its own.
func TestComponentOwnedStatefulSetSharesTheDefaultProvidersAccess(t *testing.T) {
	s, regs := constructServer(t, nil)
	_, err := s.Construct(p.ConstructRequest{Urn: componentURN,
		Inputs:           componentInputs(map[string]property.Value{"statefulSet": manifest()}),
		Config:           map[pconfig.Key]string{pconfig.MustParseKey("kubernetes:kubeconfig"): "/stack/kubeconfig"},
		ConfigSecretKeys: []pconfig.Key{pconfig.MustParseKey("kubernetes:kubeconfig")},
	})
	require.NoError(t, err)
	assert.False(t, regs.has("pulumi:providers:kubernetes"), "the StatefulSet goes through the default provider")
	assert.Empty(t, regs.get(t, "kubernetes:apps/v1:StatefulSet").RegisterRPC.GetProvider())
	in := regs.get(t, rolloutToken).Inputs
	assert.Equal(t, "/stack/kubeconfig", stringOf(in, "kubeconfig"))
	assert.True(t, in.Get("kubeconfig").Secret())
}
