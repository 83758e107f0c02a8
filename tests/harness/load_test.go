//go:build integration

package harness_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/etcd-rollout/pulumi-etcd-rollout/tests/harness"
)

// Preload writes what it says; a Load records puts and linearizable gets, and every get reads a value that
// some put wrote.
func TestLoadHelpers(t *testing.T) {
	_, e := createEtcd(t, harness.EtcdSpec{TLS: true})
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cli, err := e.Client(ctx)
	require.NoError(t, err)
	defer cli.Close()

	start := time.Now()
	rev, err := harness.Preload(ctx, cli, "preload/", 2000, 1024)
	require.NoError(t, err)
	t.Logf("preloaded 2000 x 1 KiB in %s", time.Since(start).Round(time.Millisecond))
	assert.Positive(t, rev)
	got, err := cli.Get(ctx, "preload/", clientv3.WithPrefix(), clientv3.WithCountOnly())
	require.NoError(t, err)
	assert.EqualValues(t, 2000, got.Count)

	load := harness.StartLoad(ctx, cli, harness.LoadOptions{})
	time.Sleep(time.Second)
	ops := load.Stop()
	sum := harness.Summarize(ops)
	t.Logf("load: %d ops, %d failed, slowest %s", sum.Ops, sum.Failed, sum.MaxLatency)
	assert.Zero(t, sum.Failed)
	written := map[string]bool{"": true}
	kinds := map[harness.OpKind]int{}
	for _, op := range ops {
		kinds[op.Kind]++
		assert.False(t, op.Start.IsZero())
		assert.Equal(t, op.End.Sub(op.Start), op.Latency)
		if op.Kind == harness.OpPut {
			written[op.Value] = true
		}
	}
	assert.Positive(t, kinds[harness.OpPut])
	assert.Positive(t, kinds[harness.OpGet])
	for _, op := range ops {
		if op.Kind == harness.OpGet {
			assert.True(t, written[op.Value], "get read %q, which no recorded put wrote", op.Value)
		}
	}
}
