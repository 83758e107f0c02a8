package provider

import (
	"context"
	"fmt"
	"reflect"

	p "github.com/pulumi/pulumi-go-provider"
	"github.com/pulumi/pulumi-go-provider/infer"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
)

var _ infer.CustomDiff[RolloutArgs, RolloutState] = (*Rollout)(nil)

// Diff decides what `pulumi preview` shows. A new versionHash is an update; so is a non-empty plan with an
// unchanged versionHash, which means the live cluster still needs a run (members outdated, or a partition
// a killed run left lowered); and so is a state whose last run did not complete (complete: false), whatever
// the plan says: a run that was stopped or killed is finished by the next `pulumi up`, which takes a dead
// run's lease over and leaves the partition locked, even when the preview could not read the cluster or
// found nothing left to roll. Cluster credentials (kubeconfig, context, cluster) are never a diff: rotating
// them must not roll etcd. A different StatefulSet (name or namespace) is a replacement. If the StatefulSet on the
// resolved cluster is not the one this rollout was first run on, Diff refuses, before anything is touched.
func (r *Rollout) Diff(ctx context.Context, req infer.DiffRequest[RolloutArgs, RolloutState]) (infer.DiffResponse, error) {
	in, st := req.Inputs, req.State
	diff := map[string]p.PropertyDiff{}
	change := func(key string, kind p.DiffKind) { diff[key] = p.PropertyDiff{Kind: kind} }

	if in.StsName != st.StsName {
		change("stsName", p.UpdateReplace)
	}
	if in.Namespace != st.Namespace {
		change("namespace", p.UpdateReplace)
	}
	if in.VersionHash != st.VersionHash {
		change("versionHash", p.Update)
	}
	settings := []struct {
		key      string
		old, new any
	}{
		{"serviceName", st.ServiceName, in.ServiceName},
		{"clientPort", st.ClientPort, in.ClientPort},
		{"tls", st.TLS, in.TLS},
		{"cooldownSeconds", st.CooldownSeconds, in.CooldownSeconds},
		{"readyTimeoutSeconds", st.ReadyTimeoutSeconds, in.ReadyTimeoutSeconds},
		{"healthTimeoutSeconds", st.HealthTimeoutSeconds, in.HealthTimeoutSeconds},
		{"onFailure", st.OnFailure, in.OnFailure},
	}
	for _, s := range settings {
		if !reflect.DeepEqual(s.old, s.new) {
			change(s.key, p.Update)
		}
	}
	if len(in.Plan) > 0 {
		change("plan", p.Update)
	}
	if !st.Complete {
		// An input-side diff of a key no input carries: the CLI lists it ([diff: ~complete]) without
		// printing a misleading "- complete: false" line.
		diff["complete"] = p.PropertyDiff{Kind: p.Update, InputDiff: true}
	}

	replacing := diff["stsName"].Kind == p.UpdateReplace || diff["namespace"].Kind == p.UpdateReplace
	if !replacing {
		if err := r.checkSameStatefulSet(ctx, in, st); err != nil {
			return infer.DiffResponse{}, err
		}
	}
	if len(diff) > 0 && st.LastFailure != nil {
		p.GetLogger(ctx).Warning(lastFailureWarning(*st.LastFailure))
	}
	if !st.Complete && len(in.Plan) == 0 && !replacing {
		p.GetLogger(ctx).Warningf("the last rollout of %s/%s did not complete (it was stopped or killed): this update runs it again to finish it; "+
			"it takes over the Lease of a run that is gone, re-locks the partition and checks every member", in.Namespace, in.StsName)
	}
	return infer.DiffResponse{HasChanges: len(diff) > 0, DetailedDiff: diff, DeleteBeforeReplace: false}, nil
}

// checkSameStatefulSet refuses to go on when the resolved cluster holds a different StatefulSet (by UID) than
// the one in the state: a kubeconfig or context now pointing at another cluster must not roll that cluster
// under this stack's history. A cluster that cannot be read is left to Update, which reports it.
func (r *Rollout) checkSameStatefulSet(ctx context.Context, in RolloutArgs, st RolloutState) error {
	if st.StatefulSetUID == "" {
		return nil
	}
	restConfig, err := r.deps.RestConfig(in.access())
	if err != nil {
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, observeTimeout)
	defer cancel()
	uid, err := r.deps.LookupUID(ctx, restConfig, in.Namespace, in.StsName)
	switch {
	case apierrors.IsNotFound(err):
		return nil // Check has already reported a missing StatefulSet.
	case err != nil:
		p.GetLogger(ctx).Warningf("could not read StatefulSet %s/%s to confirm it is the one rolled before: %v", in.Namespace, in.StsName, err)
		return nil
	}
	return sameStatefulSet(in, st, uid)
}

func sameStatefulSet(in RolloutArgs, st RolloutState, uid string) error {
	if st.StatefulSetUID == "" || uid == st.StatefulSetUID {
		return nil
	}
	return fmt.Errorf("StatefulSet %s/%s on the resolved cluster has UID %s, but this rollout was first run on UID %s: "+
		"the kubeconfig or context points at a different cluster, or the StatefulSet was recreated. Refusing to roll it. "+
		"If the StatefulSet was recreated on purpose, replace this resource (pulumi up --replace <its URN>)",
		in.Namespace, in.StsName, uid, st.StatefulSetUID)
}
