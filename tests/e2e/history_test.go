//go:build e2e

package e2e

import (
	"context"
	"testing"
	"time"

	"github.com/anishathalye/porcupine"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/etcd-rollout/pulumi-etcd-rollout/rollout"
	"github.com/etcd-rollout/pulumi-etcd-rollout/tests/harness"
)

// startHistory attaches to the stack's etcd and starts the background client; the returned func stops it and
// fails the test unless its history is linearizable (porcupine) and long enough to mean something.
func startHistory(ctx context.Context, t *testing.T, c *harness.Cluster, ns string) (*harness.Etcd, func()) {
	t.Helper()
	e, err := c.AttachEtcd(ns, harness.EtcdSpec{Name: "etcd", ServiceName: "etcd-headless", Replicas: 3})
	require.NoError(t, err)
	return e, recordHistory(ctx, t, e)
}

// recordHistory is startHistory for an Etcd the caller attached (with its TLS material, for an mTLS stack).
func recordHistory(ctx context.Context, t *testing.T, e *harness.Etcd) func() {
	t.Helper()
	require.NoError(t, e.WaitHealthy(ctx))
	cli, err := e.Client(ctx)
	require.NoError(t, err)
	rec := harness.StartRecorder(context.Background(), cli, harness.RecorderOptions{})
	stopped := false
	stop := func() {
		if stopped {
			return
		}
		stopped = true
		ops := rec.Stop()
		_ = cli.Close()
		sum := harness.SummarizeHistory(ops)
		check := harness.CheckLinearizable(ops, 2*time.Minute)
		t.Logf("background client: %s; porcupine: %s over %d ops", sum, check.Result, check.Ops)
		assert.GreaterOrEqual(t, sum.Puts, 20, "the background client made progress")
		assert.Equal(t, porcupine.Ok, check.Result, "the history is linearizable")
	}
	t.Cleanup(stop)
	return stop
}

// unplannedElections is the raft term's rise minus the leader transfers the rollout recorded as Events.
func unplannedElections(ctx context.Context, t *testing.T, c *harness.Cluster, ns string, before, after uint64) int {
	t.Helper()
	events, err := c.Kube.CoreV1().Events(ns).List(ctx, metav1.ListOptions{})
	require.NoError(t, err)
	transfers := 0
	for _, ev := range events.Items {
		if ev.Reason == rollout.ReasonLeaderTransferred {
			transfers++
		}
	}
	return int(after-before) - transfers
}
