//go:build integration

package harness_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/etcd-rollout/pulumi-etcd-rollout/rollout/memberdial"
	"github.com/etcd-rollout/pulumi-etcd-rollout/tests/harness"
	"github.com/etcd-rollout/pulumi-etcd-rollout/tests/harness/memberapi"
)

// A member that was reached through its pod's port-forward stops on SIGTERM like any other, instead of
// outliving its grace period: the port-forward's connection to the member ends with the pod, as on a real
// node. The bound is a correctness bound, far below the grace period, not a speed claim: the failure mode is
// "killed when the grace period ends".
func TestPortForwardedMemberStopsOnTerm(t *testing.T) {
	const grace = 20 * time.Second
	c, e := createEtcd(t, harness.EtcdSpec{GracePeriod: grace})
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()

	dialer, err := memberdial.NewPortForward(c.Config)
	require.NoError(t, err)
	defer dialer.Close()
	hostport, err := dialer.Endpoint(ctx, e.Namespace, e.PodName(1), memberapi.DefaultClientPort)
	require.NoError(t, err)
	cli, err := e.NewClient(hostport)
	require.NoError(t, err)
	_, err = cli.Status(ctx, hostport)
	require.NoError(t, err, "status of %s through %s", e.PodName(1), hostport)
	// The client is done with the member, as the engine is before it deletes a pod; the port-forward itself
	// stays open (the engine keeps its forwards until it is done), so only the client's stream has ended.
	require.NoError(t, cli.Close())

	before, err := e.Member(ctx, 1)
	require.NoError(t, err)
	start := time.Now()
	require.NoError(t, c.Kube.CoreV1().Pods(e.Namespace).Delete(ctx, e.PodName(1), metav1.DeleteOptions{}))
	require.NoError(t, wait.PollUntilContextTimeout(ctx, 50*time.Millisecond, grace+10*time.Second, true,
		func(ctx context.Context) (bool, error) {
			m, err := e.Member(ctx, 1)
			return err == nil && m.PID != before.PID, nil
		}), "the process of %s never stopped", e.PodName(1))
	took := time.Since(start)
	t.Logf("%s stopped %s after its pod's deletion (grace %s)", e.PodName(1), took.Round(time.Millisecond), grace)

	after, err := e.Member(ctx, 1)
	require.NoError(t, err)
	assert.NotContains(t, after.LastExit, "killed", "the member needed SIGKILL")
	assert.Less(t, took, 5*time.Second, "the member outlived its SIGTERM (grace period %s)", grace)
}
