package provider

import (
	"context"

	p "github.com/pulumi/pulumi-go-provider"
	"github.com/pulumi/pulumi/sdk/v3/go/pulumi"
)

// kubeProviderKey carries the kubernetes provider reference from the Construct request into the component
// function: the Go SDK turns it into a ProviderResource whose URN is only an Output, but hydrating its state
// needs the URN as a plain string.
type kubeProviderKey struct{}

// withKubeProviderRef wraps Construct so that the `kubernetes` entry of the request's providers map (the
// provider a TypeScript caller passed as `provider:` or in `providers:`) is readable from the component.
func withKubeProviderRef(prov p.Provider) p.Provider {
	inner := prov.Construct
	prov.Construct = func(ctx context.Context, req p.ConstructRequest) (p.ConstructResponse, error) {
		if ref, ok := req.Providers["kubernetes"]; ok && ref.Urn != "" {
			ctx = context.WithValue(ctx, kubeProviderKey{}, ref)
		}
		return inner(ctx, req)
	}
	return prov
}

func kubeProviderRef(ctx *pulumi.Context) (p.ProviderReference, bool) {
	ref, ok := ctx.Context().Value(kubeProviderKey{}).(p.ProviderReference)
	return ref, ok
}

// kubeProviderState receives a kubernetes provider's state: the provider stores its checked configuration as
// its outputs, so kubeconfig (a path or a document), context and cluster are what the program gave it. All
// outputs are read as one map because, in a preview, a named output the state lacks (a provider configured
// without a context) would come back unknown rather than empty.
type kubeProviderState struct {
	pulumi.ProviderResourceState

	Outputs pulumi.MapOutput `pulumi:""`
}

// accessOutputs is the cluster access handed to the child Rollout.
type accessOutputs struct {
	Kubeconfig pulumi.StringPtrOutput
	Context    pulumi.StringPtrOutput
	Cluster    pulumi.StringPtrOutput
}

// KubeProviderReader reads a kubernetes provider's configuration by URN. It is a seam for unit tests: the Go
// SDK's mock monitor does not answer getResource for a provider it did not register.
type KubeProviderReader func(ctx *pulumi.Context, ref p.ProviderReference) (accessOutputs, error)

// readKubeProvider hydrates the provider's state through the engine's getResource, which the Go SDK performs
// when a resource is "registered" with the URN_ option.
func readKubeProvider(ctx *pulumi.Context, ref p.ProviderReference) (accessOutputs, error) {
	var st kubeProviderState
	if err := ctx.RegisterResource("pulumi:providers:kubernetes", ref.Urn.Name(), nil, &st, pulumi.URN_(string(ref.Urn))); err != nil {
		return accessOutputs{}, err
	}
	pick := func(key string) pulumi.StringPtrOutput {
		return st.Outputs.ApplyT(func(m map[string]any) *string {
			if v, ok := m[key].(string); ok && v != "" {
				return &v
			}
			return nil
		}).(pulumi.StringPtrOutput)
	}
	return accessOutputs{Kubeconfig: pick("kubeconfig"), Context: pick("context"), Cluster: pick("cluster")}, nil
}
