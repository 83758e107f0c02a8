//go:build e2e

package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"testing"

	"github.com/pulumi/pulumi/sdk/v3/go/auto/optup"
	"github.com/pulumi/pulumi/sdk/v3/go/pulumi"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/etcd-rollout/pulumi-etcd-rollout/sdk/go/etcdrollout"
	"github.com/etcd-rollout/pulumi-etcd-rollout/tests/harness"
)

// TestImportLeavesTheClusterUntouched imports a Rollout for a running etcd StatefulSet (ID <ns>/<sts>) and
// checks that the Rollout lands in the state with the inputs read from the live object, and that the cluster
// is as it was: no pod restarted, the StatefulSet's spec and partition unchanged, no rollout Lease taken.
//
// `pulumi import` itself needs the program's language host to generate code and cannot run here (no
// pulumi-language-go), so the import goes through the `import` resource option, which drives the same
// engine step: Read with only the ID, then Check, and a Diff against the program's inputs that must be empty.
// The program passes what Read should have found, so the test also fails if Read fills an input differently.
func TestImportLeavesTheClusterUntouched(t *testing.T) {
	p := repoPaths(t)
	c := harness.Connect(t)
	tests := []struct {
		name    string
		spec    harness.EtcdSpec
		wantTLS map[string]any
	}{
		{name: "plain HTTP", spec: harness.EtcdSpec{Name: "etcd", ServiceName: "etcd-headless"}},
		{name: "mTLS", spec: harness.EtcdSpec{Name: "keyspace-etcd-group-0", ServiceName: "keyspace-etcd-group-0-peer", TLS: true},
			wantTLS: map[string]any{"caFile": "/var/lib/etcd-tls/ca.crt", "certFile": "/var/lib/etcd-tls/server.crt",
				"keyFile": "/var/lib/etcd-tls/server.key"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ctx := t.Context()
			ns := c.Namespace(t)
			c.MustCreateEtcd(t, ns, tt.spec)
			sts, err := c.Kube.AppsV1().StatefulSets(ns).Get(ctx, tt.spec.Name, metav1.GetOptions{})
			require.NoError(t, err)
			pods := podUIDsOf(ctx, t, c, ns, tt.spec.Name)

			program := func(ctx *pulumi.Context) error {
				args := &etcdrollout.RolloutArgs{StsName: pulumi.String(tt.spec.Name), Namespace: pulumi.String(ns),
					ServiceName: pulumi.String(tt.spec.ServiceName), VersionHash: pulumi.String(sts.Status.UpdateRevision)}
				if tt.wantTLS != nil {
					args.Tls = etcdrollout.TLSArgs{CaFile: pulumi.String(tt.wantTLS["caFile"].(string)),
						CertFile: pulumi.String(tt.wantTLS["certFile"].(string)), KeyFile: pulumi.String(tt.wantTLS["keyFile"].(string))}
				}
				_, err := etcdrollout.NewRollout(ctx, "etcd", args, pulumi.Import(pulumi.ID(ns+"/"+tt.spec.Name)))
				return err
			}
			r := newGoRunner(t, p, "etcd-rollout-import", program)
			// An imported Rollout has no kubeconfig input when it is read: the provider reaches the cluster
			// through $KUBECONFIG, as `pulumi import` would.
			r.stack.Workspace().SetEnvVar("KUBECONFIG", c.Kubeconfig)
			var out bytes.Buffer
			_, err = r.stack.Up(ctx, optup.ProgressStreams(&out))
			require.NoError(t, err, "pulumi up with the import option:\n%s", out.String())
			assert.Contains(t, out.String(), "imported")

			res := stackResource(ctx, t, r, "etcd-rollout:index:Rollout")
			assert.Equal(t, ns+"/"+tt.spec.Name, res.ID)
			in, st := res.Inputs, res.Outputs
			assert.Equal(t, tt.spec.Name, in["stsName"])
			assert.Equal(t, ns, in["namespace"])
			assert.Equal(t, tt.spec.ServiceName, in["serviceName"], "serviceName is the live spec.serviceName")
			assert.Equal(t, sts.Status.UpdateRevision, in["versionHash"])
			if tt.wantTLS == nil {
				assert.Nil(t, in["tls"])
			} else {
				assert.Equal(t, tt.wantTLS, in["tls"], "tls from the etcd container's flags")
			}
			assert.Equal(t, string(sts.UID), st["statefulSetUid"])
			assert.Equal(t, sts.Status.UpdateRevision, st["updateRevision"])
			assert.Equal(t, true, st["complete"], "a locked StatefulSet with every member healthy: %v", st["plan"])

			after, err := c.Kube.AppsV1().StatefulSets(ns).Get(ctx, tt.spec.Name, metav1.GetOptions{})
			require.NoError(t, err)
			assert.Equal(t, sts.Generation, after.Generation, "the StatefulSet's spec is untouched")
			assert.Equal(t, *sts.Spec.UpdateStrategy.RollingUpdate.Partition, *after.Spec.UpdateStrategy.RollingUpdate.Partition)
			assert.Equal(t, pods, podUIDsOf(ctx, t, c, ns, tt.spec.Name), "no pod restarted")
			_, err = c.Kube.CoordinationV1().Leases(ns).Get(ctx, tt.spec.Name+"-etcd-rollout", metav1.GetOptions{})
			assert.True(t, apierrors.IsNotFound(err), "no rollout Lease was taken: %v", err)
		})
	}
}

type checkpointResource struct {
	Type    string         `json:"type"`
	ID      string         `json:"id"`
	Inputs  map[string]any `json:"inputs"`
	Outputs map[string]any `json:"outputs"`
}

// stackResource returns the one resource of type typ in the stack's checkpoint.
func stackResource(ctx context.Context, t *testing.T, r *goRunner, typ string) checkpointResource {
	t.Helper()
	dep, err := r.stack.Export(ctx)
	require.NoError(t, err)
	var checkpoint struct {
		Resources []checkpointResource `json:"resources"`
	}
	require.NoError(t, json.Unmarshal(dep.Deployment, &checkpoint))
	for _, res := range checkpoint.Resources {
		if res.Type == typ {
			return res
		}
	}
	t.Fatalf("no %s in the stack", typ)
	return checkpointResource{}
}

func podUIDsOf(ctx context.Context, t *testing.T, c *harness.Cluster, ns, sts string) []string {
	t.Helper()
	var uids []string
	for i := 0; i < 3; i++ {
		pod, err := c.Kube.CoreV1().Pods(ns).Get(ctx, fmt.Sprintf("%s-%d", sts, i), metav1.GetOptions{})
		require.NoError(t, err)
		uids = append(uids, string(pod.UID))
	}
	return uids
}
