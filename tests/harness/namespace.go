package harness

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
)

// Namespace creates a fresh namespace for t, named after the test, and deletes it when t ends.
func (c *Cluster) Namespace(t testing.TB) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	ns, err := c.CreateNamespace(ctx, t.Name())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
		defer cancel()
		if err := c.DeleteNamespace(ctx, ns); err != nil {
			t.Errorf("cleaning up: %v", err)
		}
	})
	return ns
}

// CreateNamespace creates a namespace with a generated name that starts with a DNS-safe form of hint.
func (c *Cluster) CreateNamespace(ctx context.Context, hint string) (string, error) {
	prefix := strings.Trim(dnsSafe(hint), "-")
	if len(prefix) > 40 {
		prefix = prefix[:40]
	}
	ns, err := c.Kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{
		ObjectMeta: metav1.ObjectMeta{GenerateName: prefix + "-", Labels: map[string]string{"etcd-rollout.test/harness": "true"}},
	}, metav1.CreateOptions{})
	if err != nil {
		return "", fmt.Errorf("creating test namespace: %w", err)
	}
	// The namespace controller creates the default service account; pods are refused until it exists.
	err = wait.PollUntilContextTimeout(ctx, 50*time.Millisecond, 20*time.Second, true, func(ctx context.Context) (bool, error) {
		_, err := c.Kube.CoreV1().ServiceAccounts(ns.Name).Get(ctx, "default", metav1.GetOptions{})
		return err == nil, nil
	})
	if err != nil {
		return "", fmt.Errorf("namespace %s: default service account never appeared (is kube-controller-manager running?): %w", ns.Name, err)
	}
	return ns.Name, nil
}

// DeleteNamespace deletes ns and, to free the CPU for the next test at once, kills its etcd members: the
// StatefulSets go first (orphaning their pods, so that none is re-created: the namespace's Terminating phase
// reaches admission only a moment later), then the pods with grace 0, then the namespace. It waits until
// the member daemon runs none of the namespace's members; the namespace object itself goes a little later.
func (c *Cluster) DeleteNamespace(ctx context.Context, ns string) error {
	orphan := metav1.DeletePropagationOrphan
	err := c.Kube.AppsV1().StatefulSets(ns).DeleteCollection(ctx, metav1.DeleteOptions{PropagationPolicy: &orphan}, metav1.ListOptions{})
	if err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("deleting the statefulsets of namespace %s: %w", ns, err)
	}
	zero := int64(0)
	err = c.Kube.CoreV1().Pods(ns).DeleteCollection(ctx, metav1.DeleteOptions{GracePeriodSeconds: &zero}, metav1.ListOptions{})
	if err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("deleting the pods of namespace %s: %w", ns, err)
	}
	err = c.Kube.CoreV1().Namespaces().Delete(ctx, ns, metav1.DeleteOptions{})
	if err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("deleting namespace %s: %w", ns, err)
	}
	return wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 45*time.Second, true, func(ctx context.Context) (bool, error) {
		ms, err := c.Members.Members(ctx)
		if err != nil {
			return false, err
		}
		for _, m := range ms {
			if m.Namespace == ns && m.PID != 0 {
				return false, nil
			}
		}
		return true, nil
	})
}

func dnsSafe(s string) string {
	var b strings.Builder
	for _, r := range strings.ToLower(s) {
		if (r >= 'a' && r <= 'z') || (r >= '0' && r <= '9') {
			b.WriteRune(r)
		} else {
			b.WriteByte('-')
		}
	}
	return b.String()
}
