package provider

import (
	"context"

	p "github.com/pulumi/pulumi-go-provider"
	"github.com/pulumi/pulumi-go-provider/infer"
)

var _ infer.CustomDelete[RolloutState] = (*Rollout)(nil)

// Delete only forgets the rollout. It never unlocks the partition or touches a pod: unlocking would let the
// StatefulSet controller roll every member at once, the very thing this provider exists to prevent. The
// StatefulSet belongs to whoever created it (the program or EtcdRollingUpgrade's own child).
func (r *Rollout) Delete(ctx context.Context, req infer.DeleteRequest[RolloutState]) (infer.DeleteResponse, error) {
	st := req.State
	p.GetLogger(ctx).Infof("forgetting the rollout of StatefulSet %s/%s; left as it is: its pods, and its partition "+
		"(locked at replicas, so a template change rolls nothing until a rollout or a person lowers it)",
		st.Namespace, st.StsName)
	return infer.DeleteResponse{}, nil
}
