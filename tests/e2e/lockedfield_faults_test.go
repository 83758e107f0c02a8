//go:build e2e && faults

package e2e

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/etcd-rollout/pulumi-etcd-rollout/tests/harness"
)

// examples/yaml-owned through the plain pulumi CLI (issue 44, item 5): the component owns the StatefulSet, and
// a change Kubernetes cannot apply in place (the claim templates' storage, 1Gi → 2Gi) is refused by `pulumi
// preview` and by `pulumi up` with one line that says what to do, before pulumi-kubernetes would replace the
// StatefulSet and delete every member at once: the StatefulSet, its pods and the members stay as they were.
// Putting the size back previews clean again.
func TestFaultsALockedFieldChangeIsRefusedInPreview(t *testing.T) {
	p := repoPaths(t)
	c := harness.Connect(t)
	ctx := t.Context()
	cli, e, ns := upYAMLExample(t, p, c, "yaml-owned", map[string]string{"cooldownSeconds": "1"}, harness.EtcdSpec{Replicas: 3})
	sts, err := c.Kube.AppsV1().StatefulSets(ns).Get(ctx, "etcd", metav1.GetOptions{})
	require.NoError(t, err)
	_, uids := e.Must(t).Pods()
	term := e.Must(t).Term()

	cli.run(t, "config", "set", "storage", "2Gi")
	const first = "spec.volumeClaimTemplates cannot change in place, and replacing the StatefulSet would delete every etcd member at once; nothing was changed"
	preview := cli.fails(t, "preview", "--diff")
	t.Logf("the refused preview:\n%s", tail(preview, 14))
	require.Contains(t, preview, first, "the preview says what is refused and why")
	assert.Contains(t, preview, "live [data 1Gi], asked [data 2Gi]")
	assert.NotContains(t, preview, "Forbidden", "the refusal comes before Kubernetes' own")
	assert.Equal(t, 1, strings.Count(preview, first), "said once:\n%s", preview)
	up := cli.fails(t, "up", "--yes")
	assert.Contains(t, up, first)

	after, err := c.Kube.AppsV1().StatefulSets(ns).Get(ctx, "etcd", metav1.GetOptions{})
	require.NoError(t, err)
	assert.Equal(t, sts.UID, after.UID, "the StatefulSet was not replaced")
	assert.Equal(t, sts.Generation, after.Generation, "nor changed")
	_, uidsAfter := e.Must(t).Pods()
	assert.Equal(t, uids, uidsAfter, "no pod restarted")
	assert.Equal(t, term, e.Must(t).Term(), "no election")

	cli.run(t, "config", "set", "storage", "1Gi")
	preview = cli.run(t, "preview", "--diff", "--expect-no-changes")
	assert.NotContains(t, preview, first)
	cli.run(t, "destroy", "--yes", "--skip-preview")
}
