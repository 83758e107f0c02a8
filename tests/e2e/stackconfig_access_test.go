//go:build e2e

package e2e

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/pulumi/pulumi/sdk/v3/go/auto"
	"github.com/pulumi/pulumi/sdk/v3/go/pulumi"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/etcd-rollout/pulumi-etcd-rollout/sdk/go/etcdrollout"
	"github.com/etcd-rollout/pulumi-etcd-rollout/tests/harness"
)

// TestStackConfigClusterAccess: a stack with no kubernetes provider and no kubeconfig input, whose cluster is
// set only in the stack config (kubernetes:kubeconfig, as a secret), while $KUBECONFIG names a cluster that
// does not answer. pulumi-kubernetes' default provider applies the StatefulSet the component owns with the
// stack config, ignoring $KUBECONFIG; the Rollout must reach that same cluster, not the one $KUBECONFIG
// names, and must hold the kubeconfig only as a secret.
func TestStackConfigClusterAccess(t *testing.T) {
	p := repoPaths(t)
	c := harness.Connect(t)
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Minute)
	defer cancel()
	ns := c.Namespace(t)

	svc, sts, err := harness.Render(harness.EtcdSpec{NodeName: c.NodeName})
	require.NoError(t, err)
	svc.Namespace = ns
	_, err = c.Kube.CoreV1().Services(ns).Create(ctx, svc, metav1.CreateOptions{})
	require.NoError(t, err)
	manifest := manifestMap(t, sts)

	r := newGoRunner(t, p, "etcd-rollout-stack-config", func(ctx *pulumi.Context) error {
		up, err := etcdrollout.NewEtcdRollingUpgrade(ctx, "etcd", &etcdrollout.EtcdRollingUpgradeArgs{
			StsName:         pulumi.String(sts.Name),
			Namespace:       pulumi.String(ns),
			ServiceName:     pulumi.String(svc.Name),
			CooldownSeconds: pulumi.Int(1),
			StatefulSet:     pulumi.ToMap(manifest),
		})
		if err != nil {
			return err
		}
		ctx.Export("updateRevision", up.UpdateRevision)
		return nil
	})
	r.stack.Workspace().SetEnvVar("KUBECONFIG", unreachableKubeconfig(t, c))
	require.NoError(t, r.stack.SetConfig(ctx, "kubernetes:kubeconfig", auto.ConfigValue{Value: c.Kubeconfig, Secret: true}))

	res, err := r.up(ctx, nil)
	require.NoError(t, err, "up with the cluster in the stack config and a dead $KUBECONFIG:\n%s", res.explained())
	live := viewStatefulSet(ctx, t, c, ns)
	requireRolledAndLocked(t, live)
	assert.Equal(t, live.UpdateRevision, res.Outputs["updateRevision"], "the Rollout read the cluster the StatefulSet is on")

	raw, rollout := stateOf(t, r, "etcd-rollout:index:Rollout")
	assert.NotContains(t, raw, c.Kubeconfig, "the stack config's kubeconfig is in the Rollout's state only encrypted")
	kc, _ := rollout["inputs"]["kubeconfig"].(map[string]any)
	assert.Contains(t, kc, secretSig, "the Rollout's inputs hold the kubeconfig as a secret: %v", rollout["inputs"]["kubeconfig"])
	assert.Contains(t, kc, "ciphertext", "and encrypted")
	if out, ok := rollout["outputs"]["kubeconfig"]; ok {
		assert.Contains(t, out, secretSig, "an output kubeconfig is a secret too")
	}

	require.NoError(t, r.destroy(ctx))
}

// manifestMap is the StatefulSet as the map a program passes to the component, without server-set fields.
func manifestMap(t *testing.T, obj any) map[string]any {
	t.Helper()
	b, err := json.Marshal(obj)
	require.NoError(t, err)
	var m map[string]any
	require.NoError(t, json.Unmarshal(b, &m))
	delete(m, "status")
	var drop func(any)
	drop = func(v any) { // creationTimestamp: null, at every metadata level
		if mm, ok := v.(map[string]any); ok {
			if mm["creationTimestamp"] == nil {
				delete(mm, "creationTimestamp")
			}
			for _, child := range mm {
				drop(child)
			}
		}
	}
	drop(m)
	return m
}

// unreachableKubeconfig is the local cluster's kubeconfig with every server moved to a port nothing listens
// on: a client that uses it fails at once.
func unreachableKubeconfig(t *testing.T, c *harness.Cluster) string {
	t.Helper()
	cfg, err := clientcmd.LoadFromFile(c.Kubeconfig)
	require.NoError(t, err)
	for _, cl := range cfg.Clusters {
		cl.Server = "https://127.0.0.1:1"
	}
	path := filepath.Join(t.TempDir(), "unreachable-kubeconfig")
	require.NoError(t, clientcmd.WriteToFile(*cfg, path))
	return path
}

// secretSig marks a secret value in a Pulumi state file.
const secretSig = "4dabf18193072939515e22adb298388d"

// stateOf is the one resource of type typ in the stack's state file as the file backend stores it (secrets
// encrypted; an export would show them decrypted): its JSON, and its inputs and outputs.
func stateOf(t *testing.T, r *goRunner, typ string) (string, map[string]map[string]any) {
	t.Helper()
	backend := strings.TrimPrefix(r.stack.Workspace().GetEnvVars()["PULUMI_BACKEND_URL"], "file://")
	require.NotEmpty(t, backend)
	files, err := filepath.Glob(filepath.Join(backend, ".pulumi", "stacks", "*", "e2e.json"))
	require.NoError(t, err)
	require.Len(t, files, 1, "one stack file under %s", backend)
	b, err := os.ReadFile(files[0])
	require.NoError(t, err)
	var file struct {
		Checkpoint struct {
			Latest struct {
				Resources []json.RawMessage `json:"resources"`
			} `json:"latest"`
		} `json:"checkpoint"`
	}
	require.NoError(t, json.Unmarshal(b, &file))
	for _, raw := range file.Checkpoint.Latest.Resources {
		var res struct {
			Type    string         `json:"type"`
			Inputs  map[string]any `json:"inputs"`
			Outputs map[string]any `json:"outputs"`
		}
		require.NoError(t, json.Unmarshal(raw, &res))
		if res.Type == typ {
			return string(raw), map[string]map[string]any{"inputs": res.Inputs, "outputs": res.Outputs}
		}
	}
	t.Fatalf("no %s in %s", typ, files[0])
	return "", nil
}
