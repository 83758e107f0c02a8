package rollout

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/etcd-rollout/pulumi-etcd-rollout/rollout/internal/kubeapi"
)

// revisionTemplate is the part of a StatefulSet ControllerRevision's data the engine reads: the controller
// stores the pod template each revision creates pods from as a patch of the StatefulSet
// ({"spec":{"template":{"$patch":"replace",...}}}).
type revisionTemplate struct {
	Spec struct {
		Template corev1.PodTemplateSpec `json:"template"`
	} `json:"spec"`
}

// comingBackImage is the etcd image a member's pod comes back on when it is deleted with the partition
// locked: the StatefulSet controller recreates pods below the partition from its current revision, whatever
// the member ran before. A revert or a recreate is judged on that image (checkPointOfNoReturn), never on the
// one this run restarted the member from, which a resumed run or a third revision makes another. It reads
// the ControllerRevision; without it (not allowed, or gone) a pod at the current revision names the image;
// "" when neither can, which the point-of-no-return check takes for an unknown version.
func (e *Engine) comingBackImage(ctx context.Context, st ClusterState, ordinal int) string {
	img, err := e.revisionImage(ctx, st.CurrentRevision)
	if err == nil {
		return img
	}
	e.emit(Step{Kind: StepRecreate, Ordinal: ordinal}, "reading revision %s, which %s would come back on: %v; taking the image of a pod at that revision instead",
		st.CurrentRevision, st.Members[ordinal].Pod, err)
	for _, m := range st.Members {
		if m.Ordinal != ordinal && m.Revision == st.CurrentRevision && m.Image != "" {
			return m.Image
		}
	}
	return ""
}

// revisionImage reads the etcd container's image from the StatefulSet's ControllerRevision rev.
func (e *Engine) revisionImage(ctx context.Context, rev string) (string, error) {
	spec, err := e.revisionPodSpec(ctx, rev)
	if err != nil {
		return "", err
	}
	c := EtcdContainer(spec.Containers)
	if c == nil || c.Image == "" {
		return "", fmt.Errorf("ControllerRevision %s has no etcd container", rev)
	}
	return c.Image, nil
}

// revisionPodSpec reads the pod spec the StatefulSet's ControllerRevision rev creates pods from.
func (e *Engine) revisionPodSpec(ctx context.Context, rev string) (*corev1.PodSpec, error) {
	if rev == "" {
		return nil, errors.New("the StatefulSet names no current revision")
	}
	var data []byte
	err := kubeapi.WithRetry(ctx, func(ctx context.Context) error {
		cr, err := e.kube.AppsV1().ControllerRevisions(e.cfg.Namespace).Get(ctx, rev, metav1.GetOptions{})
		if err == nil {
			data = cr.Data.Raw
		}
		return err
	})
	if err != nil {
		return nil, explainForbidden(err)
	}
	var t revisionTemplate
	if err := json.Unmarshal(data, &t); err != nil {
		return nil, fmt.Errorf("ControllerRevision %s: %w", rev, err)
	}
	return &t.Spec.Template.Spec, nil
}
