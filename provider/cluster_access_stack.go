package provider

import (
	"github.com/pulumi/pulumi/sdk/v3/go/pulumi"
)

// The stack config keys pulumi-kubernetes' default provider reads for cluster access. The engine hands a
// component's Construct the whole stack config, keyed "<namespace>:<name>" (config.Key.String()), and the Go
// SDK's construct puts it in the pulumi.Context's RunInfo, where ctx.GetConfig and ctx.IsConfigSecret read it
// (pulumi-go-provider v1.5.0 ProgramConstruct -> pulumi/sdk/v3 go/pulumi/provider.go construct).
const (
	stackKubeconfigKey = "kubernetes:kubeconfig"
	stackContextKey    = "kubernetes:context"
	stackClusterKey    = "kubernetes:cluster"
)

// stackClusterAccess is the cluster access of pulumi-kubernetes' default provider: the one that applies a
// StatefulSet the program created without a provider option. That provider (provider/v4 pkg/provider
// provider.go, Configure) takes a non-empty `kubernetes:kubeconfig` (a path or the document) and then ignores
// $KUBECONFIG; without one it uses client-go's default loading rules ($KUBECONFIG, ~/.kube/config). Either
// way `kubernetes:context` and `kubernetes:cluster` override the current context and its cluster. The Rollout
// resolves its ClusterAccess the same way (ResolveRestConfig), so handing it these three values reaches the
// cluster the default provider reaches; an empty value is the same as an unset one, as it is there.
//
// A value set with `pulumi config set --secret` stays a secret; the kubeconfig is made a secret by the
// caller whatever its source.
func stackClusterAccess(ctx *pulumi.Context) accessOutputs {
	return accessOutputs{
		Kubeconfig: stackConfigValue(ctx, stackKubeconfigKey),
		Context:    stackConfigValue(ctx, stackContextKey),
		Cluster:    stackConfigValue(ctx, stackClusterKey),
	}
}

func stackConfigValue(ctx *pulumi.Context, key string) pulumi.StringPtrOutput {
	v, ok := ctx.GetConfig(key)
	if !ok || v == "" {
		return pulumi.ToOutput((*string)(nil)).(pulumi.StringPtrOutput)
	}
	out := pulumi.StringPtr(v).ToStringPtrOutput()
	if ctx.IsConfigSecret(key) {
		out = pulumi.ToSecret(out).(pulumi.StringPtrOutput)
	}
	return out
}
