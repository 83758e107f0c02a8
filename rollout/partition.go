package rollout

import (
	"context"
	"fmt"

	"k8s.io/apimachinery/pkg/types"
)

// setPartition writes spec.updateStrategy.rollingUpdate.partition and returns the StatefulSet's new
// generation, which the executor then expects to see unchanged until its own next write.
func (e *Engine) setPartition(ctx context.Context, partition int) (int64, error) {
	patch := fmt.Sprintf(`{"spec":{"updateStrategy":{"type":"RollingUpdate","rollingUpdate":{"partition":%d}}}}`, partition)
	var gen int64
	// The patch is idempotent, so it is safe to repeat while the API server is briefly away.
	err := withAPIRetry(ctx, func(ctx context.Context) error {
		sts, err := e.kube.AppsV1().StatefulSets(e.cfg.Namespace).Patch(ctx, e.cfg.StatefulSet, types.MergePatchType, []byte(patch), metav1PatchOptions)
		if err == nil {
			gen = sts.Generation
		}
		return err
	})
	if err != nil {
		return 0, fmt.Errorf("setting partition of %s/%s to %d: %w", e.cfg.Namespace, e.cfg.StatefulSet, partition, err)
	}
	return gen, nil
}
