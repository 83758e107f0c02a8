package provider

import (
	"context"
	"fmt"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/etcd-rollout/pulumi-etcd-rollout/rollout"
)

// DefaultDeps are the production dependencies: the rollout engine on a real cluster.
func DefaultDeps() Deps {
	return Deps{
		NewEngine:  newRolloutEngine,
		Plan:       rollout.PlanRollout,
		LookupUID:  lookupUID,
		RestConfig: ResolveRestConfig,
	}
}

// lookupUID reads one StatefulSet; errors keep their Kubernetes status so callers can tell NotFound apart.
func lookupUID(ctx context.Context, restConfig *rest.Config, namespace, name string) (string, error) {
	client, err := kubernetes.NewForConfig(restConfig)
	if err != nil {
		return "", fmt.Errorf("kubernetes client: %w", err)
	}
	sts, err := client.AppsV1().StatefulSets(namespace).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return "", fmt.Errorf("reading StatefulSet %s/%s: %w", namespace, name, err)
	}
	return string(sts.UID), nil
}
