package provider

import (
	"fmt"

	"github.com/pulumi/pulumi-kubernetes/sdk/v4/go/kubernetes"
	appsv1 "github.com/pulumi/pulumi-kubernetes/sdk/v4/go/kubernetes/apps/v1"
	"github.com/pulumi/pulumi/sdk/v3/go/pulumi"
)

// ownedStatefulSet is the StatefulSet the component applies, and what the Rollout learns of its template.
type ownedStatefulSet struct {
	sts *appsv1.StatefulSet
	// versionHash is computed from the pod template; etcdContainer is its etcd container for preview's checks
	// (pendingEtcdContainer).
	versionHash, etcdContainer pulumi.StringOutput
}

// ownStatefulSet creates the StatefulSet from the manifest as the component's child, locked and skipAwait
// annotated, and returns it with the versionHash computed from its pod template.
func (c component) ownStatefulSet(ctx *pulumi.Context, name string, args EtcdRollingUpgradeArgs, comp *EtcdRollingUpgrade,
	kubeProvider pulumi.ProviderResource,
) (ownedStatefulSet, error) {
	locked := pulumi.All(args.StatefulSet.ToMapOutput(), args.StsName, args.Namespace, args.ServiceName).
		ApplyT(func(xs []any) (map[string]any, error) {
			return lockManifest(xs[0].(map[string]any), xs[1].(string), xs[2].(string), xs[3].(string))
		}).(pulumi.MapOutput)
	field := func(key string) pulumi.AnyOutput {
		return locked.ApplyT(func(m map[string]any) any { return m[key] }).(pulumi.AnyOutput)
	}
	props := pulumi.Map{
		"apiVersion": pulumi.String("apps/v1"),
		"kind":       pulumi.String("StatefulSet"),
		"metadata":   field("metadata"),
		"spec":       field("spec"),
	}
	opts := []pulumi.ResourceOption{pulumi.Parent(comp), pulumi.Version(kubernetesSDKVersion)}
	if kubeProvider != nil {
		opts = append(opts, pulumi.Provider(kubeProvider))
	}
	var sts appsv1.StatefulSet
	if err := ctx.RegisterResource("kubernetes:apps/v1:StatefulSet", name, props, &sts, opts...); err != nil {
		return ownedStatefulSet{}, fmt.Errorf("registering the StatefulSet of %s: %w", name, err)
	}
	return ownedStatefulSet{
		sts:           &sts,
		versionHash:   locked.ApplyT(func(m map[string]any) (string, error) { return templateHash(m) }).(pulumi.StringOutput),
		etcdContainer: locked.ApplyT(func(m map[string]any) (string, error) { return pendingEtcdContainer(m) }).(pulumi.StringOutput),
	}, nil
}

// newKubeProvider makes the kubernetes provider for an owned StatefulSet from the component's kubeconfig
// input, so the StatefulSet and the rollout reach the same cluster.
func newKubeProvider(ctx *pulumi.Context, name string, args EtcdRollingUpgradeArgs, comp *EtcdRollingUpgrade,
) (pulumi.ProviderResource, error) {
	kargs := &kubernetes.ProviderArgs{Kubeconfig: pulumi.ToSecret(args.Kubeconfig).(pulumi.StringOutput).ToStringPtrOutput()}
	if args.Context != nil {
		kargs.Context = args.Context.ToStringOutput().ToStringPtrOutput()
	}
	kp, err := kubernetes.NewProvider(ctx, name, kargs, pulumi.Parent(comp), pulumi.Version(kubernetesSDKVersion))
	if err != nil {
		return nil, fmt.Errorf("creating the kubernetes provider of %s from its kubeconfig: %w", name, err)
	}
	return kp, nil
}
