package provider

import (
	"fmt"

	p "github.com/pulumi/pulumi-go-provider"
	"github.com/pulumi/pulumi/sdk/v3/go/pulumi"
)

// rolloutToken is the type token of the child that does the work.
const rolloutToken = Name + ":index:Rollout"

// kubernetesSDKVersion pins the kubernetes provider used for a StatefulSet the component owns when the
// program passes no kubernetes provider; it matches the pulumi-kubernetes Go SDK in go.mod.
const kubernetesSDKVersion = "4.25.0"

// component builds EtcdRollingUpgrade. readKube is a field so unit tests can stand in for the engine's
// getResource.
type component struct {
	readKube KubeProviderReader
	// readLive reads a StatefulSet the component owns as it stands, to refuse a change of a locked field
	// before pulumi-kubernetes replaces it (nil: not compared).
	readLive LiveStatefulSetReader
}

// construct registers the component, resolves cluster access, optionally creates the StatefulSet it owns,
// and registers the Rollout child that runs the engine.
func (c component) construct(ctx *pulumi.Context, name string, args EtcdRollingUpgradeArgs,
	opts ...pulumi.ResourceOption,
) (*EtcdRollingUpgrade, error) {
	if args.StsName == nil || args.Namespace == nil || args.ServiceName == nil {
		return nil, fmt.Errorf("EtcdRollingUpgrade %s: stsName, namespace and serviceName are required", name)
	}
	if args.VersionHash == nil && args.StatefulSet == nil {
		return nil, fmt.Errorf("EtcdRollingUpgrade %s: versionHash is required unless statefulSet is given "+
			"(then it is computed from the pod template)", name)
	}
	comp := &EtcdRollingUpgrade{}
	if err := ctx.RegisterComponentResource(p.GetTypeToken(ctx.Context()), name, comp, opts...); err != nil {
		return nil, err
	}
	given, err := pulumi.NewResourceOptions(opts...)
	if err != nil {
		return nil, fmt.Errorf("reading the resource options of %s: %w", name, err)
	}

	access, kubeProvider, err := c.clusterAccess(ctx, name, args, comp)
	if err != nil {
		return nil, err
	}

	// Children do not inherit customTimeouts; the Rollout is where they matter. The version makes the engine
	// pick the same default provider the program's SDK used for the component (default_<version>) from the
	// first up on; without it the first up made the Rollout a provider of its own ("default"), and the second
	// up moved it over, a one-time diff and a provider delete that looked like a change.
	rolloutOpts := []pulumi.ResourceOption{pulumi.Parent(comp)}
	if Version != "" {
		rolloutOpts = append(rolloutOpts, pulumi.Version(Version))
	}
	if given.CustomTimeouts != nil {
		rolloutOpts = append(rolloutOpts, pulumi.Timeouts(given.CustomTimeouts))
	}
	// Never a dependency on the component's own parent (often the StatefulSet, in the old call shape): the
	// Go SDK expands a dependency on a parent stand-in into its children, which include this component and
	// the Rollout being registered, and would wait for the Rollout's own URN forever. The parent is complete
	// before Construct runs anyway; dependsOnSts below is the explicit dependency.
	var dependsOn []pulumi.Resource
	versionHash := args.VersionHash
	// stsMustExist: nothing this update creates stands before the StatefulSet, so the Rollout's Check may
	// call a missing one a bad input even on the first create. Without a dependsOnSts, nothing does.
	stsMustExist := pulumi.Bool(true).ToBoolOutput()
	var etcdContainer pulumi.StringInput
	if args.StatefulSet != nil {
		owned, err := c.ownStatefulSet(ctx, name, args, comp, kubeProvider, access)
		if err != nil {
			return nil, err
		}
		dependsOn = append(dependsOn, owned.sts)
		if versionHash == nil {
			versionHash = owned.versionHash
		}
		etcdContainer = owned.etcdContainer
		stsMustExist = owned.sts.ID().ApplyT(func(pulumi.ID) bool { return true }).(pulumi.BoolOutput) // see allExist
	}
	if len(dependsOn) > 0 {
		rolloutOpts = append(rolloutOpts, pulumi.DependsOn(dependsOn))
	}
	if args.DependsOnSts.OutputState != nil {
		deps := resourcesIn(args.DependsOnSts)
		rolloutOpts = append(rolloutOpts, pulumi.DependsOnInputs(deps))
		if args.StatefulSet == nil {
			stsMustExist = allExist(deps)
		}
	}

	inputs := childRolloutInputs(args, versionHash, access, stsMustExist)
	if etcdContainer != nil {
		inputs["etcdContainer"] = etcdContainer
	}
	var ro rolloutResource
	if err := ctx.RegisterResource(rolloutToken, name, inputs, &ro, rolloutOpts...); err != nil {
		return nil, fmt.Errorf("registering the rollout of %s: %w", name, err)
	}
	comp.VersionHash = ro.VersionHash
	comp.UpdateRevision = ro.UpdateRevision
	comp.MembersRolled = ro.MembersRolled
	comp.LeaderTransfers = ro.LeaderTransfers
	comp.UnplannedElections = ro.UnplannedElections
	comp.FinishedAt = ro.FinishedAt
	comp.Snapshot = ro.Snapshot
	comp.WriteOutage = ro.WriteOutage
	comp.Job = referenceTo(&ro)
	return comp, nil
}

// childRolloutInputs are the child Rollout's inputs: the component's own, the resolved cluster access (the
// kubeconfig as a secret), and stsMustExist, which is not a dependency, only a hint for the Rollout's Check
// (see allExist).
func childRolloutInputs(args EtcdRollingUpgradeArgs, versionHash pulumi.StringInput, access accessOutputs,
	stsMustExist pulumi.BoolOutput) pulumi.Map {
	inputs := pulumi.Map{
		"stsName":      args.StsName,
		"namespace":    args.Namespace,
		"serviceName":  args.ServiceName,
		"versionHash":  versionHash,
		"kubeconfig":   pulumi.ToSecret(access.Kubeconfig),
		"context":      access.Context,
		"cluster":      access.Cluster,
		"stsMustExist": stsMustExist,
	}
	if args.OnFailure != nil {
		inputs["onFailure"] = args.OnFailure
	}
	if args.AcceptPreStopMemberRemoval != nil {
		inputs["acceptPreStopMemberRemoval"] = args.AcceptPreStopMemberRemoval
	}
	if args.AcceptWriteOutage != nil {
		inputs["acceptWriteOutage"] = args.AcceptWriteOutage
	}
	if args.SnapshotTo != nil {
		inputs["snapshotTo"] = args.SnapshotTo
	}
	if args.ProceedWithoutSnapshot != nil {
		inputs["proceedWithoutSnapshot"] = args.ProceedWithoutSnapshot
	}
	optional := map[string]pulumi.IntInput{
		"clientPort":           args.ClientPort,
		"cooldownSeconds":      args.CooldownSeconds,
		"readyTimeoutSeconds":  args.ReadyTimeoutSeconds,
		"healthTimeoutSeconds": args.HealthTimeoutSeconds,
	}
	for key, v := range optional {
		if v != nil {
			inputs[key] = v
		}
	}
	if args.TLS != nil {
		inputs["tls"] = pulumi.Map{
			"caFile":   pulumi.String(args.TLS.CaFile),
			"certFile": pulumi.String(args.TLS.CertFile),
			"keyFile":  pulumi.String(args.TLS.KeyFile),
		}
	}
	return inputs
}

// clusterAccess resolves the Rollout's cluster access so that it reaches the cluster the StatefulSet is
// applied to. In order:
//  1. the kubernetes provider passed in the options: its kubeconfig, context and cluster, read from its state;
//  2. the explicit kubeconfig input, with the context input;
//  3. what pulumi-kubernetes' default provider uses (stackClusterAccess): the stack config
//     kubernetes:kubeconfig, kubernetes:context and kubernetes:cluster, a context input overriding
//     kubernetes:context; with no kubernetes:kubeconfig either, the Rollout falls back to client-go's default
//     loading rules ($KUBECONFIG, ~/.kube/config), as that provider does. A stack that configures
//     kubernetes:kubeconfig thus never has its StatefulSet applied to one cluster and rolled on the one
//     $KUBECONFIG names.
//
// It also returns the kubernetes provider a StatefulSet child must use, when the component has to make one
// from the kubeconfig input; otherwise that child gets the default provider, whose access is step 3's.
func (c component) clusterAccess(ctx *pulumi.Context, name string, args EtcdRollingUpgradeArgs, comp *EtcdRollingUpgrade,
) (accessOutputs, pulumi.ProviderResource, error) {
	if ref, ok := kubeProviderRef(ctx); ok {
		access, err := c.readKube(ctx, ref)
		if err != nil {
			return accessOutputs{}, nil, fmt.Errorf("reading the kubernetes provider %s passed to %s: %w", ref.Urn.Name(), name, err)
		}
		return access, nil, nil
	}
	if args.Kubeconfig == nil {
		access := stackClusterAccess(ctx)
		if args.Context != nil {
			access.Context = optionalString(args.Context)
		}
		return access, nil, nil
	}
	access := accessOutputs{
		Kubeconfig: optionalString(args.Kubeconfig),
		Context:    optionalString(args.Context),
		Cluster:    pulumi.ToOutput((*string)(nil)).(pulumi.StringPtrOutput),
	}
	var kubeProvider pulumi.ProviderResource
	if args.StatefulSet != nil {
		kp, err := newKubeProvider(ctx, name, args, comp)
		if err != nil {
			return accessOutputs{}, nil, err
		}
		kubeProvider = kp
	}
	return access, kubeProvider, nil
}

func optionalString(in pulumi.StringInput) pulumi.StringPtrOutput {
	if in == nil {
		return pulumi.ToOutput((*string)(nil)).(pulumi.StringPtrOutput)
	}
	return in.ToStringOutput().ApplyT(func(s string) *string {
		if s == "" {
			return nil
		}
		return &s
	}).(pulumi.StringPtrOutput)
}

// resourcesIn turns dependsOnSts, which may be any value, into the resources it names, so that the rollout
// waits for them. A TypeScript resource arrives as a resource reference and is rehydrated by the Go SDK.
func resourcesIn(v pulumi.AnyOutput) pulumi.ResourceArrayOutput {
	return v.ApplyT(func(x any) []pulumi.Resource {
		return collectResources(x)
	}).(pulumi.ResourceArrayOutput)
}

// allExist is true when every resource in rs already exists on the cluster: each is a custom resource
// whose ID is known. In a preview, a resource this update creates (or replaces) has no ID yet, so the result
// stays unknown and the Rollout's Check leaves a missing StatefulSet to the update, which creates it first.
// A component (a yaml.ConfigFile, say) hides what it creates, so it gives false: nobody can tell.
func allExist(rs pulumi.ResourceArrayOutput) pulumi.BoolOutput {
	return rs.ApplyT(func(list []pulumi.Resource) pulumi.BoolOutput {
		var ids []any
		for _, r := range list {
			cr, ok := r.(pulumi.CustomResource)
			if !ok {
				return pulumi.Bool(false).ToBoolOutput()
			}
			ids = append(ids, cr.ID())
		}
		return pulumi.All(ids...).ApplyT(func([]any) bool { return true }).(pulumi.BoolOutput)
	}).(pulumi.BoolOutput)
}

func collectResources(x any) []pulumi.Resource {
	switch v := x.(type) {
	case pulumi.Resource:
		return []pulumi.Resource{v}
	case []any:
		var out []pulumi.Resource
		for _, e := range v {
			out = append(out, collectResources(e)...)
		}
		return out
	case []pulumi.Resource:
		return v
	}
	return nil
}
