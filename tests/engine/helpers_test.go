//go:build integration

// Package engine_test runs the rollout engine against the local cluster of `make cluster-up`: a real
// kube-apiserver and StatefulSet controller, and real etcd members behind the pods. The tests fail, never
// skip, when the cluster is not up.
package engine_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/etcd-rollout/pulumi-etcd-rollout/rollout"
	"github.com/etcd-rollout/pulumi-etcd-rollout/tests/harness"
	"github.com/etcd-rollout/pulumi-etcd-rollout/tests/harness/memberapi"
)

// The two production shapes of tests/manifests, with a short grace period: a member that outlives its
// SIGTERM is killed after 5s instead of 30s, which keeps the suite short and changes nothing the engine
// does (it never restarts a leader).
var (
	httpSpec = harness.EtcdSpec{Name: "etcd", ServiceName: "etcd-headless", GracePeriod: 5 * time.Second}
	mtlsSpec = harness.EtcdSpec{Name: "keyspace-etcd-group-0", ServiceName: "keyspace-etcd-group-0-peer", TLS: true,
		Readiness: memberapi.ReadyOnProbe, GracePeriod: 5 * time.Second}
)

type fixture struct {
	t    *testing.T
	c    *harness.Cluster
	etcd *harness.Etcd
	must harness.MustEtcd
}

func newFixture(t *testing.T, spec harness.EtcdSpec) *fixture {
	t.Helper()
	c := harness.Connect(t)
	ns := c.Namespace(t)
	e := c.MustCreateEtcd(t, ns, spec)
	return &fixture{t: t, c: c, etcd: e, must: e.Must(t)}
}

// engine builds the engine under test with the harness's test settings.
func (f *fixture) engine(mutate func(*rollout.Config, *rollout.Options)) *rollout.Engine {
	f.t.Helper()
	return f.must.Engine(mutate)
}

// requireRolledTo checks the end state the issue promises: every pod at rev, the partition re-locked, and
// etcd healthy by the harness's own independent check.
func (f *fixture) requireRolledTo(rev string) {
	f.t.Helper()
	revs, _ := f.must.Pods()
	for i, r := range revs {
		require.Equal(f.t, rev, r, "pod %d revision", i)
	}
	require.Equal(f.t, f.etcd.Spec.Replicas, f.must.Partition(), "partition re-locked")
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	require.NoError(f.t, f.etcd.WaitHealthy(ctx))
}

// put writes a key through every member so a test can show no acknowledged write was lost.
func (f *fixture) client() *clientv3.Client {
	f.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	cli, err := f.etcd.Client(ctx)
	require.NoError(f.t, err)
	f.t.Cleanup(func() { _ = cli.Close() })
	return cli
}

func runCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	t.Cleanup(cancel)
	return ctx
}

func label(i int) string { return fmt.Sprintf("v%d-%d", i, time.Now().UnixNano()) }

// toolsBin is where make tools puts the pinned binaries: $TOOLS_DIR/bin, or the repository's .tools/bin.
func toolsBin(t *testing.T) string {
	t.Helper()
	if dir := os.Getenv("TOOLS_DIR"); dir != "" {
		return filepath.Join(dir, "bin")
	}
	root, err := harness.RepoRoot()
	require.NoError(t, err)
	return filepath.Join(root, ".tools", "bin")
}
