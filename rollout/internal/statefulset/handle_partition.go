package statefulset

import (
	"context"
	"encoding/json"
	"fmt"

	appsv1 "k8s.io/api/apps/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/etcd-rollout/pulumi-etcd-rollout/rollout/internal/gate"
	"github.com/etcd-rollout/pulumi-etcd-rollout/rollout/internal/kubeapi"
	"github.com/etcd-rollout/pulumi-etcd-rollout/rollout/internal/planner"
)

// PatchOptions names the engine as the field manager of its partition writes, which is how another run
// or a person tells them from their own in managedFields (InterferenceError.Writer).
var PatchOptions = metav1.PatchOptions{FieldManager: "etcd-rollout"}

// SetPartition writes spec.updateStrategy.rollingUpdate.partition and returns the StatefulSet's new
// generation, which the executor then expects to see unchanged until its own next write.
func (h *Handle) SetPartition(ctx context.Context, partition int) (int64, error) {
	patch := fmt.Sprintf(`{"spec":{"updateStrategy":{"type":"RollingUpdate","rollingUpdate":{"partition":%d}}}}`, partition)
	var written *appsv1.StatefulSet
	// The patch is idempotent, so it is safe to repeat while the API server is briefly away.
	err := kubeapi.WithRetry(ctx, func(ctx context.Context) (err error) {
		written, err = h.Kube.AppsV1().StatefulSets(h.Namespace).Patch(ctx, h.Name, types.MergePatchType, []byte(patch), PatchOptions)
		return err
	})
	if err != nil {
		return 0, fmt.Errorf("setting partition of %s/%s to %d: %w", h.Namespace, h.Name, partition, err)
	}
	h.wrote.Store(written.Generation)
	h.releaseFieldOwnership(ctx, written)
	return written.Generation, nil
}

// LowerPartition writes partition only if the StatefulSet is still at generation, the one this run observed
// and planned from: a template (or any spec) written by someone else between that observation and this write
// would make the controller restart the highest outdated member at once, which is where the run may just have
// parked the leader. A failed precondition is interference (ErrInterference, naming the writer from
// managedFields); nothing was written then. Locking never needs this: partition = replicas is always safe.
func (h *Handle) LowerPartition(ctx context.Context, permit gate.Permit, partition int, generation int64) (int64, error) {
	patch, err := json.Marshal([]map[string]any{
		{"op": "test", "path": "/metadata/generation", "value": generation},
		{"op": "replace", "path": "/spec/updateStrategy/rollingUpdate/partition", "value": partition},
	})
	if err != nil {
		return 0, err
	}
	var written *appsv1.StatefulSet
	wctx, cancel := permit.Within(ctx)
	defer cancel()
	err = kubeapi.WithRetry(wctx, func(ctx context.Context) (err error) {
		written, err = h.Kube.AppsV1().StatefulSets(h.Namespace).Patch(ctx, h.Name, types.JSONPatchType, patch, PatchOptions)
		return err
	})
	if err != nil {
		return h.lowerRefused(ctx, partition, generation, err)
	}
	h.wrote.Store(written.Generation)
	h.releaseFieldOwnership(ctx, written)
	return written.Generation, nil
}

// lowerRefused tells a refused conditional lowering apart: the StatefulSet moved past generation (someone
// wrote its spec: interference), or this very write went through and only its answer was lost (a retry then
// fails the test against the generation it bumped itself: one generation on, at the partition it asked
// for), or the write failed for another reason.
func (h *Handle) lowerRefused(ctx context.Context, partition int, generation int64, writeErr error) (int64, error) {
	var sts *appsv1.StatefulSet
	if err := kubeapi.WithRetry(ctx, func(ctx context.Context) (err error) {
		sts, err = h.Kube.AppsV1().StatefulSets(h.Namespace).Get(ctx, h.Name, metav1.GetOptions{})
		return err
	}); err != nil {
		return 0, fmt.Errorf("lowering the partition of %s/%s to %d: %w (and reading it back: %v)", h.Namespace, h.Name, partition, writeErr, err)
	}
	switch {
	case sts.Generation == generation:
		return 0, fmt.Errorf("lowering the partition of %s/%s to %d: %w", h.Namespace, h.Name, partition, writeErr)
	case sts.Generation == generation+1 && Partition(sts) == partition:
		h.wrote.Store(sts.Generation)
		return sts.Generation, nil
	}
	return 0, &InterferenceError{Generation: sts.Generation, Expected: generation, Writer: LastSpecWriter(sts),
		Action: fmt.Sprintf("lowering the partition to %d", partition)}
}

// LastSpecWriter names the field manager that wrote the StatefulSet's spec last, by its managedFields (status
// writes by the controller and the engine's own do not count); "" when none says.
func LastSpecWriter(sts *appsv1.StatefulSet) string {
	var latest *metav1.ManagedFieldsEntry
	for i := range sts.ManagedFields {
		m := &sts.ManagedFields[i]
		if m.Subresource != "" || m.Time == nil || m.Manager == PatchOptions.FieldManager {
			continue
		}
		if latest == nil || !m.Time.Before(latest.Time) {
			latest = m
		}
	}
	if latest == nil {
		return ""
	}
	return latest.Manager
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
func (h *Handle) releaseFieldOwnership(ctx context.Context, sts *appsv1.StatefulSet) {
	for attempt := 0; attempt < 5 && sts != nil; attempt++ {
		patch, ok := WithoutManager(sts, PatchOptions.FieldManager)
		if !ok {
			return
		}
		_, err := h.Kube.AppsV1().StatefulSets(h.Namespace).Patch(ctx, h.Name, types.JSONPatchType, patch, metav1.PatchOptions{})
		if err == nil || apierrors.IsForbidden(err) || apierrors.IsNotFound(err) || ctx.Err() != nil {
			return // done, or an error a retry will not fix (the next partition write tries again)
		}
		// Most likely the resourceVersion test failed (the controller wrote status meanwhile): read the
		// StatefulSet again and retry.
		if sts, err = h.Kube.AppsV1().StatefulSets(h.Namespace).Get(ctx, h.Name, metav1.GetOptions{}); err != nil {
			return
		}
	}
}

// WithoutManager is a JSON patch that replaces the object's managedFields with every entry but manager's,
// conditional on the resourceVersion it was computed from; ok is false when manager owns nothing.
func WithoutManager(sts *appsv1.StatefulSet, manager string) (patch []byte, ok bool) {
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

// OthersExposedBy says which pod above ordinal lowering the partition to ordinal would also hand to the
// controller ("" when none): one not at updateRevision, terminating or missing, by the API server's own
// word. The run's looks come from its watch, which can lag the API server by seconds, and a pod someone else
// replaced onto the old revision meanwhile would be restarted beside the member planned (the schedule
// checker's seeds 603, 2570 and 4802 with a lagging watch: etcd-4, replaced by someone else after it passed,
// went down again with etcd-3). A pod that cannot be read is said too: the run looks again either way.
func (h *Handle) OthersExposedBy(ctx context.Context, ordinal, replicas int, updateRevision string) string {
	for o := ordinal + 1; o < replicas; o++ {
		if why := h.PodOffRevision(ctx, planner.PodName(h.Name, o), updateRevision); why != "" {
			return why
		}
	}
	return ""
}

// PodOffRevision says, by the API server's own word, how pod is not a live pod at rev ("" when it is): gone,
// terminating, at another revision, or not readable.
func (h *Handle) PodOffRevision(ctx context.Context, pod, rev string) string {
	p, err := h.Kube.CoreV1().Pods(h.Namespace).Get(ctx, pod, metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
		return pod + " has no pod"
	case err != nil:
		return fmt.Sprintf("%s could not be read (%v)", pod, err)
	case p.DeletionTimestamp != nil:
		return pod + "'s pod is terminating"
	case p.Labels[appsv1.ControllerRevisionHashLabelKey] != rev:
		return fmt.Sprintf("%s runs revision %s, not %s", pod, p.Labels[appsv1.ControllerRevisionHashLabelKey], rev)
	}
	return ""
}
