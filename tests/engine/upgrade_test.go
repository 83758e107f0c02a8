//go:build integration

package engine_test

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/etcd-rollout/pulumi-etcd-rollout/rollout"
	"github.com/etcd-rollout/pulumi-etcd-rollout/tests/harness"
)

// A whole 3.5 → 3.6 upgrade: a verified snapshot of the 3.5 cluster stored before the first step, every
// member rolled onto the 3.6 binary with no election, the run waits for etcd to move the cluster version once
// the last member runs 3.6 and reports it, and it counts the API requests it made.
func TestMinorUpgradeReportsTheClusterVersion(t *testing.T) {
	spec := httpSpec
	spec.Version = "3.5"
	f := newFixture(t, spec)
	ctx := runCtx(t)
	putKeys(ctx, t, f.etcd, 200)
	written, err := f.client().Put(ctx, "/upgrade/last", "acknowledged")
	require.NoError(t, err)
	before := f.must.Term()
	rev := f.must.ChangeVersion("3.6", harness.StartFaults{})

	var said []string
	var kinds []rollout.EventKind
	res, err := f.engine(func(cfg *rollout.Config, o *rollout.Options) {
		log := o.OnEvent
		o.OnEvent = func(ev rollout.Event) {
			log(ev)
			said = append(said, ev.Message)
			kinds = append(kinds, ev.Kind)
		}
	}).Run(ctx)
	require.NoError(t, err)
	t.Logf("%s", res.Summary())
	revs, _ := f.must.Pods()
	assert.Equal(t, []string{rev, rev, rev}, revs)
	assert.Regexp(t, `^3\.6\.`, res.ClusterVersion, "the cluster version moved to 3.6")
	assert.Contains(t, strings.Join(said, "\n"), "cluster version is "+res.ClusterVersion+" (", "said so")
	assert.Equal(t, before+uint64(res.LeaderTransfers), f.must.Term(), "raft term rose only by the transfers")
	assert.Positive(t, res.APIRequests)

	require.NotNil(t, res.Snapshot, "a snapshot before the point of no return")
	assert.Less(t, slices.Index(kinds, rollout.EventSnapshotStored), slices.Index(kinds, rollout.EventMemberRestarting), "stored before the first restart")
	assert.GreaterOrEqual(t, res.Snapshot.Revision, written.Header.Revision, "it holds the last acknowledged write")
	assert.Empty(t, res.Snapshot.StorageVersion, "a 3.5 cluster's data: no storage version recorded")
	assert.Regexp(t, `^3\.5\.`, res.Snapshot.EtcdVersion)
	assert.FileExists(t, strings.TrimPrefix(res.Snapshot.Location, "file://"))

	// The rollback path works: the snapshot, restored with 3.5's etcdutl as docs/usage.md says, starts a 3.5
	// member that holds every key written before the upgrade and none written after it.
	_, err = f.client().Put(ctx, "/upgrade/after", "written on 3.6")
	require.NoError(t, err)
	restored := restoreSnapshot(ctx, t, strings.TrimPrefix(res.Snapshot.Location, "file://"), "etcdutl-v3.5", "etcd-v3.5")
	status, err := restored.Status(ctx, restored.Endpoints()[0])
	require.NoError(t, err)
	assert.Regexp(t, `^3\.5\.`, status.Version)
	all, err := restored.Get(ctx, "/downgrade/", clientv3.WithPrefix(), clientv3.WithCountOnly())
	require.NoError(t, err)
	assert.EqualValues(t, 200, all.Count, "every key written before the upgrade")
	last, err := restored.Get(ctx, "/upgrade/last")
	require.NoError(t, err)
	require.Len(t, last.Kvs, 1, "the last acknowledged write before the snapshot")
	after, err := restored.Get(ctx, "/upgrade/after")
	require.NoError(t, err)
	assert.Empty(t, after.Kvs, "nothing written after it")
	assert.Greater(t, status.Header.Revision, written.Header.Revision, "the revision bumped past the old cluster's, as Kubernetes' watchers need")
}

// restoreSnapshot restores file with the pinned etcdutl into a fresh data dir (a new one-member cluster, the
// revision bumped and compacted as docs/usage.md says for a Kubernetes etcd), starts the pinned etcd on it and
// returns a client of it; the process ends with the test.
func restoreSnapshot(ctx context.Context, t *testing.T, file, etcdutl, etcd string) *clientv3.Client {
	t.Helper()
	bin := toolsBin(t)
	dir := t.TempDir()
	client, peer := freeLocalPort(t), freeLocalPort(t)
	clientURL, peerURL := fmt.Sprintf("http://127.0.0.1:%d", client), fmt.Sprintf("http://127.0.0.1:%d", peer)
	out, err := exec.CommandContext(ctx, filepath.Join(bin, etcdutl), "snapshot", "restore", file, "--data-dir", filepath.Join(dir, "data"),
		"--name", "restored", "--initial-cluster", "restored="+peerURL, "--initial-advertise-peer-urls", peerURL,
		"--bump-revision", "1000000", "--mark-compacted").CombinedOutput()
	require.NoError(t, err, "etcdutl snapshot restore:\n%s", out)
	log, err := os.Create(filepath.Join(dir, "etcd.log"))
	require.NoError(t, err)
	cmd := exec.Command(filepath.Join(bin, etcd), "--name", "restored", "--data-dir", filepath.Join(dir, "data"),
		"--listen-client-urls", clientURL, "--advertise-client-urls", clientURL, "--listen-peer-urls", peerURL)
	cmd.Stdout, cmd.Stderr = log, log
	require.NoError(t, cmd.Start())
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		if t.Failed() {
			b, _ := os.ReadFile(log.Name())
			t.Logf("the restored etcd's log:\n%s", b)
		}
	})
	cli, err := clientv3.New(clientv3.Config{Endpoints: []string{clientURL}, DialTimeout: 5 * time.Second})
	require.NoError(t, err)
	t.Cleanup(func() { _ = cli.Close() })
	return cli
}

func freeLocalPort(t *testing.T) int {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}
