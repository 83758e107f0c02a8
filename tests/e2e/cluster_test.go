//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/etcd-rollout/pulumi-etcd-rollout/tests/harness"
)

// stsView is what the tests check on the live StatefulSet after an operation.
type stsView struct {
	Replicas       int
	Partition      int
	UpdateRevision string
	PodRevisions   []string // by ordinal
}

func viewStatefulSet(ctx context.Context, t *testing.T, c *harness.Cluster, ns string) stsView {
	t.Helper()
	sts, err := c.Kube.AppsV1().StatefulSets(ns).Get(ctx, "etcd", metav1.GetOptions{})
	require.NoError(t, err)
	v := stsView{Replicas: int(*sts.Spec.Replicas), Partition: -1, UpdateRevision: sts.Status.UpdateRevision}
	if ru := sts.Spec.UpdateStrategy.RollingUpdate; ru != nil && ru.Partition != nil {
		v.Partition = int(*ru.Partition)
	}
	for i := 0; i < v.Replicas; i++ {
		pod, err := c.Kube.CoreV1().Pods(ns).Get(ctx, fmt.Sprintf("etcd-%d", i), metav1.GetOptions{})
		if err != nil {
			v.PodRevisions = append(v.PodRevisions, "")
			continue
		}
		v.PodRevisions = append(v.PodRevisions, pod.Labels["controller-revision-hash"])
	}
	return v
}

// requireRolledAndLocked checks the state every rollout must end in: the partition back at replicas and
// every pod at the StatefulSet's updateRevision.
func requireRolledAndLocked(t *testing.T, v stsView) {
	t.Helper()
	require.Equal(t, v.Replicas, v.Partition, "the partition is locked at replicas")
	require.NotEmpty(t, v.UpdateRevision)
	for i, rev := range v.PodRevisions {
		require.Equal(t, v.UpdateRevision, rev, "etcd-%d is at updateRevision", i)
	}
}

// renderManifest writes the harness's etcd manifest with a pod-template annotation that stands for the
// template version: changing rev changes the template.
func renderManifest(t *testing.T, c *harness.Cluster, dir string, tls bool, rev string) string {
	t.Helper()
	y, err := harness.RenderYAML(harness.EtcdSpec{TLS: tls, NodeName: c.NodeName})
	require.NoError(t, err)
	text := strings.Replace(string(y), "\n      annotations:\n",
		fmt.Sprintf("\n      annotations:\n        example.etcd-rollout/pod-revision: %q\n", rev), 1)
	require.NotEqual(t, string(y), text, "the pod template has an annotations block")
	path := filepath.Join(dir, "etcd-"+rev+".yaml")
	require.NoError(t, os.WriteFile(path, []byte(text), 0o644))
	return path
}

// createTLSSecret puts the harness's certificates where the TLS manifest mounts them, and returns them for the
// test's own clients.
func createTLSSecret(ctx context.Context, t *testing.T, c *harness.Cluster, ns string) harness.TLSMaterial {
	t.Helper()
	spec, err := harness.EtcdSpec{TLS: true}.WithDefaults()
	require.NoError(t, err)
	m, err := harness.GenerateTLS(spec, ns)
	require.NoError(t, err)
	_, err = c.Kube.CoreV1().Secrets(ns).Create(ctx, &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: spec.SecretName()},
		Type:       corev1.SecretTypeOpaque,
		Data:       m.SecretData(),
	}, metav1.CreateOptions{})
	require.NoError(t, err)
	return m
}

// waitRolloutStarted waits until the partition is below replicas: the engine has begun restarting members.
// check is called on every poll so the caller can fail early (the up it waits for has already ended).
func waitRolloutStarted(ctx context.Context, t *testing.T, c *harness.Cluster, ns string, check func()) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Minute)
	for time.Now().Before(deadline) {
		check()
		sts, err := c.Kube.AppsV1().StatefulSets(ns).Get(ctx, "etcd", metav1.GetOptions{})
		if err == nil && sts.Spec.UpdateStrategy.RollingUpdate != nil && sts.Spec.UpdateStrategy.RollingUpdate.Partition != nil &&
			*sts.Spec.UpdateStrategy.RollingUpdate.Partition < *sts.Spec.Replicas {
			return
		}
		time.Sleep(100 * time.Millisecond)
	}
	t.Fatal("the rollout never lowered the partition")
}
