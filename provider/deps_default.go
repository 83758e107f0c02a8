package provider

import (
	"context"
	"fmt"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
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
		ReadFacts:  readFacts,
		ReadLive:   readLiveStatefulSet(ResolveRestConfig),
	}
}

// readLiveStatefulSet is the production LiveStatefulSetReader, reaching the cluster through resolve.
func readLiveStatefulSet(resolve RestConfigResolver) LiveStatefulSetReader {
	return func(ctx context.Context, access ClusterAccess, namespace, name string) (*appsv1.StatefulSet, error) {
		restConfig, err := resolve(access)
		if err != nil {
			return nil, err
		}
		client, err := kubernetes.NewForConfig(restConfig)
		if err != nil {
			return nil, fmt.Errorf("kubernetes client: %w", err)
		}
		ctx, cancel := context.WithTimeout(ctx, observeTimeout)
		defer cancel()
		sts, err := client.AppsV1().StatefulSets(namespace).Get(ctx, name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return nil, nil
		}
		if err != nil {
			return nil, fmt.Errorf("reading StatefulSet %s/%s: %w", namespace, name, err)
		}
		return sts, nil
	}
}

// readFacts reads the StatefulSet, and only when it is missing, its namespace (so the message can name the
// right field). Errors other than NotFound are returned: Check then only warns. A Forbidden namespace or
// Lease read (a namespace-scoped Role) leaves that fact unknown.
func readFacts(ctx context.Context, restConfig *rest.Config, namespace, name string) (clusterFacts, error) {
	client, err := kubernetes.NewForConfig(restConfig)
	if err != nil {
		return clusterFacts{}, fmt.Errorf("kubernetes client: %w", err)
	}
	var f clusterFacts
	sts, err := client.AppsV1().StatefulSets(namespace).Get(ctx, name, metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
		_, nsErr := client.CoreV1().Namespaces().Get(ctx, namespace, metav1.GetOptions{})
		f.NamespaceMissing = apierrors.IsNotFound(nsErr)
		return f, nil
	case err != nil:
		return f, fmt.Errorf("reading StatefulSet %s/%s: %w", namespace, name, err)
	}
	f.StatefulSet = sts
	f.MemberImages = map[string]string{}
	for i := 0; sts.Spec.Replicas != nil && i < int(*sts.Spec.Replicas); i++ {
		pod, err := client.CoreV1().Pods(namespace).Get(ctx, fmt.Sprintf("%s-%d", name, i), metav1.GetOptions{})
		if err != nil {
			continue // a missing pod runs nothing; the engine reports pods it cannot read
		}
		if c := rollout.EtcdContainer(pod.Spec.Containers); c != nil {
			f.MemberImages[pod.Name] = c.Image
			if rollout.V2Enabled(c) {
				f.MemberV2 = append(f.MemberV2, pod.Name)
			}
		}
	}
	if cm, err := client.CoreV1().ConfigMaps(namespace).Get(ctx, rollout.StatusConfigMapName(name), metav1.GetOptions{}); err == nil {
		f.Applied = rollout.ParseStatus(cm.Data) // best effort: without it a preview plans from the inputs alone
	}
	lease, err := client.CoordinationV1().Leases(namespace).Get(ctx, rollout.LeaseName(name), metav1.GetOptions{})
	switch {
	case err == nil:
		f.LeaseHeld = lease.Spec.HolderIdentity != nil && *lease.Spec.HolderIdentity != ""
		if f.LeaseHeld {
			f.Lease = leaseFacts{Name: namespace + "/" + lease.Name, Holder: *lease.Spec.HolderIdentity}
			if lease.Spec.LeaseDurationSeconds != nil {
				f.Lease.Duration = time.Duration(*lease.Spec.LeaseDurationSeconds) * time.Second
			}
		}
	case apierrors.IsForbidden(err):
		f.LeaseHeld = true // unknown: leave a lowered partition to the engine, which reads the Lease itself
	case !apierrors.IsNotFound(err):
		return f, fmt.Errorf("reading Lease %s/%s: %w", namespace, rollout.LeaseName(name), err)
	}
	return f, nil
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
