package provider

import (
	"context"
	"fmt"

	"github.com/pulumi/pulumi-kubernetes/sdk/v4/go/kubernetes"
	appsv1 "github.com/pulumi/pulumi-kubernetes/sdk/v4/go/kubernetes/apps/v1"
	"github.com/pulumi/pulumi/sdk/v3/go/pulumi"
	"github.com/pulumi/pulumi/sdk/v3/go/pulumi/internals"
)

// ownedStatefulSet is the StatefulSet the component applies, and what the Rollout learns of its template.
type ownedStatefulSet struct {
	sts *appsv1.StatefulSet
	// versionHash is computed from the pod template; etcdContainer is its etcd container for preview's checks
	// (pendingEtcdContainer).
	versionHash, etcdContainer pulumi.StringOutput
}

// ownStatefulSet creates the StatefulSet from the manifest as the component's child, locked and skipAwait
// annotated, and returns it with the versionHash computed from its pod template. A manifest that changes a
// locked field of the live StatefulSet (notLocked) fails here, in preview too, before pulumi-kubernetes would
// replace the StatefulSet.
func (c component) ownStatefulSet(ctx *pulumi.Context, name string, args EtcdRollingUpgradeArgs, comp *EtcdRollingUpgrade,
	kubeProvider pulumi.ProviderResource, access accessOutputs,
) (ownedStatefulSet, error) {
	locked := pulumi.All(args.StatefulSet.ToMapOutput(), args.StsName, args.Namespace, args.ServiceName).
		ApplyT(func(xs []any) (map[string]any, error) {
			m, err := lockManifest(xs[0].(map[string]any), xs[1].(string), xs[2].(string), xs[3].(string))
			if err != nil {
				return nil, err
			}
			return m, c.notLocked(ctx, access, xs[2].(string), xs[1].(string), m)
		}).(pulumi.MapOutput)
	// Awaited here, so that a refused manifest (bad input, a locked field changed) fails Construct with its own
	// first line, before anything is registered, rather than as a rejected input deep in the StatefulSet's.
	if _, err := internals.UnsafeAwaitOutput(ctx.Context(), locked); err != nil {
		return ownedStatefulSet{}, err
	}
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

// notLocked refuses a manifest that changes a locked field of the live StatefulSet (statefulSetFields):
// pulumi-kubernetes would plan it as a replacement, deleting every member at once. A StatefulSet not there yet
// has nothing to change; one that cannot be read (no cluster access known yet, as in the first preview of a
// stack that creates its kubernetes provider) is left to pulumi-kubernetes, with a warning when the read
// failed.
//
// The access is awaited here rather than joined to the manifest's output: the manifest must stay known in a
// preview whose access is not, and must not turn secret because the kubeconfig is.
func (c component) notLocked(ctx *pulumi.Context, access accessOutputs, namespace, name string, manifest map[string]any) error {
	if c.readLive == nil {
		return nil
	}
	clusterAccess, known, err := awaitAccess(ctx.Context(), access)
	if err != nil || !known {
		return nil // the Rollout reports an access it cannot use
	}
	target := namespace + "/" + name
	live, err := c.readLive(ctx.Context(), clusterAccess, namespace, name)
	if err != nil {
		_ = ctx.Log.Warn(fmt.Sprintf("StatefulSet %s could not be read to check its locked fields (volumeClaimTemplates, selector, serviceName, podManagementPolicy) are unchanged: %v", target, err), nil)
		return nil
	}
	if live == nil {
		return nil
	}
	changes, err := lockedFieldChanges(live, manifest)
	if err != nil {
		return err
	}
	if len(changes) > 0 {
		return lockedFieldsError(target, changes)
	}
	return nil
}

// awaitAccess waits for the cluster access outputs; known is false when one of them is unknown (a preview).
func awaitAccess(ctx context.Context, access accessOutputs) (ClusterAccess, bool, error) {
	var values [3]string
	for i, o := range []pulumi.StringPtrOutput{access.Kubeconfig, access.Context, access.Cluster} {
		if o.OutputState == nil {
			continue
		}
		r, err := internals.UnsafeAwaitOutput(ctx, o)
		if err != nil || !r.Known {
			return ClusterAccess{}, false, err
		}
		s, _ := r.Value.(*string)
		values[i] = deref(s)
	}
	return ClusterAccess{Kubeconfig: values[0], Context: values[1], Cluster: values[2]}, true, nil
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
