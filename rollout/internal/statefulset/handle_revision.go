package statefulset

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/etcd-rollout/pulumi-etcd-rollout/rollout/internal/kubeapi"
	"github.com/etcd-rollout/pulumi-etcd-rollout/rollout/internal/planner"
)

// revisionTemplate is the part of a StatefulSet ControllerRevision's data the engine reads: the controller
// stores the pod template each revision creates pods from as a patch of the StatefulSet
// ({"spec":{"template":{"$patch":"replace",...}}}).
type revisionTemplate struct {
	Spec struct {
		Template corev1.PodTemplateSpec `json:"template"`
	} `json:"spec"`
}

// RevisionImage reads the etcd container's image from the StatefulSet's ControllerRevision rev.
func (h *Handle) RevisionImage(ctx context.Context, rev string) (string, error) {
	spec, err := h.RevisionPodSpec(ctx, rev)
	if err != nil {
		return "", err
	}
	c := planner.EtcdContainer(spec.Containers)
	if c == nil || c.Image == "" {
		return "", fmt.Errorf("ControllerRevision %s has no etcd container", rev)
	}
	return c.Image, nil
}

// RevisionPodSpec reads the pod spec the StatefulSet's ControllerRevision rev creates pods from.
func (h *Handle) RevisionPodSpec(ctx context.Context, rev string) (*corev1.PodSpec, error) {
	if rev == "" {
		return nil, errors.New("the StatefulSet names no current revision")
	}
	var data []byte
	err := kubeapi.WithRetry(ctx, func(ctx context.Context) error {
		cr, err := h.Kube.AppsV1().ControllerRevisions(h.Namespace).Get(ctx, rev, metav1.GetOptions{})
		if err == nil {
			data = cr.Data.Raw
		}
		return err
	})
	if err != nil {
		return nil, err
	}
	var t revisionTemplate
	if err := json.Unmarshal(data, &t); err != nil {
		return nil, fmt.Errorf("ControllerRevision %s: %w", rev, err)
	}
	return &t.Spec.Template.Spec, nil
}
