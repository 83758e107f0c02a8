package rollout

import (
	"context"
	"encoding/json"
	"fmt"

	appsv1 "k8s.io/api/apps/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

// setPartition writes spec.updateStrategy.rollingUpdate.partition and returns the StatefulSet's new
// generation, which the executor then expects to see unchanged until its own next write.
func (e *Engine) setPartition(ctx context.Context, partition int) (int64, error) {
	patch := fmt.Sprintf(`{"spec":{"updateStrategy":{"type":"RollingUpdate","rollingUpdate":{"partition":%d}}}}`, partition)
	var written *appsv1.StatefulSet
	// The patch is idempotent, so it is safe to repeat while the API server is briefly away.
	err := withAPIRetry(ctx, func(ctx context.Context) (err error) {
		written, err = e.kube.AppsV1().StatefulSets(e.cfg.Namespace).Patch(ctx, e.cfg.StatefulSet, types.MergePatchType, []byte(patch), metav1PatchOptions)
		return err
	})
	if err != nil {
		return 0, fmt.Errorf("setting partition of %s/%s to %d: %w", e.cfg.Namespace, e.cfg.StatefulSet, partition, err)
	}
	e.wroteGeneration.Store(written.Generation)
	e.releaseFieldOwnership(ctx, written)
	return written.Generation, nil
}

// releaseFieldOwnership drops the engine's managedFields entry right after each partition write, so the
// engine never co-owns the partition with whoever applies the StatefulSet.
//
// Why: pulumi-kubernetes (and kubectl apply --server-side) apply the StatefulSet with server-side apply.
// A field co-owned by another manager with a different value is a conflict, so a run killed while the
// partition was lowered (a SIGKILLed `pulumi up`, a dead CI runner) would leave every later apply of the
// StatefulSet failing with `conflict with "etcd-rollout" ... partition` until someone ran `etcd-rollout
// unlock` by hand; and if the apply forced past it with a new template, members would roll unwatched.
// Without an owner besides the appliers, their next apply simply writes partition = replicas again — it
// re-locks in the same request that changes the template, so nothing rolls unwatched. The value the engine
// wrote stays; only the claim goes. The engine does not need the claim: it detects a partition changed
// under it by value (checkUnchanged), not by ownership.
//
// It is best effort: a failure leaves the claim, which is what every run did before this existed, and the
// next write tries again.
func (e *Engine) releaseFieldOwnership(ctx context.Context, sts *appsv1.StatefulSet) {
	for attempt := 0; attempt < 5 && sts != nil; attempt++ {
		patch, ok := withoutManager(sts, metav1PatchOptions.FieldManager)
		if !ok {
			return
		}
		_, err := e.kube.AppsV1().StatefulSets(e.cfg.Namespace).Patch(ctx, e.cfg.StatefulSet, types.JSONPatchType, patch, metav1.PatchOptions{})
		if err == nil || apierrors.IsForbidden(err) || apierrors.IsNotFound(err) || ctx.Err() != nil {
			return // done, or an error a retry will not fix (the next partition write tries again)
		}
		// Most likely the resourceVersion test failed (the controller wrote status meanwhile): read the
		// StatefulSet again and retry.
		if sts, err = e.kube.AppsV1().StatefulSets(e.cfg.Namespace).Get(ctx, e.cfg.StatefulSet, metav1.GetOptions{}); err != nil {
			return
		}
	}
}

// withoutManager is a JSON patch that replaces the object's managedFields with every entry but manager's,
// conditional on the resourceVersion it was computed from; ok is false when manager owns nothing.
func withoutManager(sts *appsv1.StatefulSet, manager string) (patch []byte, ok bool) {
	kept := make([]metav1.ManagedFieldsEntry, 0, len(sts.ManagedFields))
	for _, m := range sts.ManagedFields {
		if m.Manager == manager {
			ok = true
			continue
		}
		kept = append(kept, m)
	}
	if !ok {
		return nil, false
	}
	var value any = kept
	if len(kept) == 0 {
		// An empty list means "leave managedFields alone"; one empty entry is the API's way to clear them.
		value = []map[string]any{{}}
	}
	patch, err := json.Marshal([]map[string]any{
		{"op": "test", "path": "/metadata/resourceVersion", "value": sts.ResourceVersion},
		{"op": "replace", "path": "/metadata/managedFields", "value": value},
	})
	return patch, err == nil
}
