//go:build faults

package faults_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
)

// applier is the field manager that stands for pulumi-kubernetes, which applies StatefulSets with
// server-side apply.
const applier = "pulumi-kubernetes-test"

// A run SIGKILLed while the partition is lowered must not make the next server-side apply of the StatefulSet
// (pulumi-kubernetes' next `pulumi up`, with the killed run's template or a newer one) fail with
// `conflict with "etcd-rollout" ... partition`: the engine gives up its claim on the partition after every
// write, so the apply succeeds and re-locks the partition in the same request that changes the template.
// Before that, only a manual `etcd-rollout unlock` got such a stack going again.
func TestKilledRunLeavesNoFieldConflictForTheNextApply(t *testing.T) {
	t.Parallel()
	bin := cliBinary(t)
	f := newFixture(t)
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	name := f.etcd.Spec.Name
	require.NoError(t, serverSideApply(ctx, f, "2"), "the applier owns the partition and the template")

	args := []string{"run", "--sts", name, "-n", f.etcd.Namespace, "--kubeconfig", f.c.Kubeconfig,
		"--cooldown", "0s", "--lease-duration", "4s"}
	killCLIAt(ctx, t, bin, args, "partition lowered to 2")
	require.Equal(t, 2, f.must.Partition(), "the kill left the partition lowered")
	for _, m := range f.must.StatefulSet().ManagedFields {
		assert.NotEqual(t, "etcd-rollout", m.Manager, "the engine claims no field of the StatefulSet")
	}

	// The next apply, with a newer template, is not refused, and it locks the partition again itself.
	require.NoError(t, serverSideApply(ctx, f, "3"), "the next apply after the kill")
	assert.Equal(t, 3, f.must.Partition(), "the apply re-locked the partition")

	out, code := runCLI(ctx, t, bin, args...)
	require.Equal(t, 0, code, "%s", out)
	assert.Contains(t, out, "took over the stale lease of")
	f.requireState(f.must.StatefulSet().Status.UpdateRevision)
}

// serverSideApply applies the partition lock and a template annotation as the applier, as pulumi-kubernetes
// would (no force: a conflict is an error).
func serverSideApply(ctx context.Context, f *fixture, rev string) error {
	body := fmt.Sprintf(`{"apiVersion":"apps/v1","kind":"StatefulSet","metadata":{"name":%q},"spec":{`+
		`"updateStrategy":{"type":"RollingUpdate","rollingUpdate":{"partition":%d}},`+
		`"template":{"metadata":{"annotations":{"example.etcd-rollout/pod-revision":%q}}}}}`,
		f.etcd.Spec.Name, f.etcd.Spec.Replicas, rev)
	_, err := f.c.Kube.AppsV1().StatefulSets(f.etcd.Namespace).Patch(ctx, f.etcd.Spec.Name, types.ApplyPatchType,
		[]byte(body), metav1.PatchOptions{FieldManager: applier, Force: ptr.To(false)})
	return err
}
