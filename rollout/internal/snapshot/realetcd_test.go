package snapshot

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/etcd-rollout/pulumi-etcd-rollout/rollout/internal/member"
)

// A snapshot of a real etcd member, through the member's client (member.Clients.Snapshot) as the engine takes
// it, stored to a directory and verified: for both minors the engine rolls between.
func TestTakeASnapshotOfARealMember(t *testing.T) {
	puts := func(ctx context.Context, cli *clientv3.Client) error {
		for i := range 200 {
			if _, err := cli.Put(ctx, fmt.Sprintf("/registry/secrets/k%03d", i), "v"); err != nil {
				return err
			}
		}
		return nil
	}
	for _, tc := range []struct {
		name, binary, storageVersion string
		fill                         func(context.Context, *clientv3.Client) error
		minRevision                  int64
	}{
		{name: "3.6 with keys", binary: "etcd", storageVersion: "3.6.0", fill: puts, minRevision: 201},
		{name: "3.5 with keys", binary: "etcd-v3.5", fill: puts, minRevision: 201},
		// Nothing ever written: the store is at revision 1 with an empty key bucket.
		{name: "3.6 empty", binary: "etcd", storageVersion: "3.6.0", fill: func(context.Context, *clientv3.Client) error { return nil }, minRevision: 1},
		// Every key deleted, then compacted at the delete: the revision read from the file is still the store's.
		{name: "3.6 deleted and compacted", binary: "etcd", storageVersion: "3.6.0", minRevision: 202,
			fill: func(ctx context.Context, cli *clientv3.Client) error {
				if err := puts(ctx, cli); err != nil {
					return err
				}
				del, err := cli.Delete(ctx, "/registry/", clientv3.WithPrefix())
				if err != nil {
					return err
				}
				_, err = cli.Compact(ctx, del.Header.Revision, clientv3.WithCompactPhysical())
				return err
			}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			endpoint := startEtcd(t, toolBinary(t, tc.binary))
			cli, err := clientv3.New(clientv3.Config{Endpoints: []string{endpoint}, DialTimeout: 5 * time.Second})
			require.NoError(t, err)
			defer cli.Close()
			require.NoError(t, tc.fill(ctx, cli))
			clients := member.NewClients(dialer{"etcd-0": endpoint}, "db", "etcd", 2379, nil)
			defer clients.Close()
			var before member.Status
			require.Eventually(t, func() bool { before, err = clients.Status(ctx, "etcd-0"); return err == nil }, 30*time.Second, 100*time.Millisecond)
			require.GreaterOrEqual(t, before.Revision, tc.minRevision)

			dest, err := Parse(filepath.Join(t.TempDir(), "backups"))
			require.NoError(t, err)
			rec, err := Take(ctx, func(ctx context.Context, consume func(Stream) error) error {
				return clients.Snapshot(ctx, "etcd-0", func(s member.SnapshotStream) error {
					return consume(Stream{Data: s.Data, Revision: s.Revision, StorageVersion: s.StorageVersion, ClusterID: s.ClusterID})
				})
			}, dest, Options{Key: "db/etcd/x.db", Member: "etcd-0", EtcdVersion: before.Version,
				ExpectedSize: before.DbSize, RevisionBefore: before.Revision})
			require.NoError(t, err)
			assert.Equal(t, before.Revision, rec.Revision, "the revision etcd reports, read from the file; nothing was written meanwhile")
			assert.Equal(t, tc.storageVersion, rec.StorageVersion)
			assert.Positive(t, rec.ConsistentIndex)
			t.Logf("%s: %d bytes, revision %d, %.1f MB/s", before.Version, rec.Size, rec.Revision, rec.MBPerSecond)
		})
	}
}

type dialer map[string]string

func (d dialer) Endpoint(_ context.Context, _, pod string, _ int) (string, error) {
	if addr, ok := d[pod]; ok {
		return addr, nil
	}
	return "", fmt.Errorf("no local member %s", pod)
}
func (dialer) Release(string, string, int) {}
func (dialer) Close() error                { return nil }

// toolBinary is one of the pinned binaries make tools builds (.tools/bin, or $TOOLS_DIR/bin).
func toolBinary(t *testing.T, name string) string {
	dir := os.Getenv("TOOLS_DIR")
	if dir == "" {
		abs, err := filepath.Abs(filepath.Join("..", "..", "..", ".tools"))
		require.NoError(t, err)
		dir = abs
	}
	bin := filepath.Join(dir, "bin", name)
	if _, err := os.Stat(bin); err != nil {
		if testing.Short() {
			t.Skipf("%s is not built (make tools); skipped in -short", bin)
		}
		t.Fatalf("%s is not built: run `make tools`", bin)
	}
	return bin
}

// startEtcd runs a one-member etcd until the test ends and returns its client address once it serves.
func startEtcd(t *testing.T, bin string) string {
	dir := t.TempDir()
	client, peer := freePort(t), freePort(t)
	clientURL, peerURL := fmt.Sprintf("http://127.0.0.1:%d", client), fmt.Sprintf("http://127.0.0.1:%d", peer)
	log, err := os.Create(filepath.Join(dir, "etcd.log"))
	require.NoError(t, err)
	cmd := exec.Command(bin, "--name", "etcd-0", "--data-dir", filepath.Join(dir, "data"),
		"--listen-client-urls", clientURL, "--advertise-client-urls", clientURL,
		"--listen-peer-urls", peerURL, "--initial-advertise-peer-urls", peerURL, "--initial-cluster", "etcd-0="+peerURL)
	cmd.Stdout, cmd.Stderr = log, log
	require.NoError(t, cmd.Start())
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		if t.Failed() {
			out, _ := os.ReadFile(log.Name())
			t.Logf("etcd's log:\n%s", out)
		}
	})
	return fmt.Sprintf("127.0.0.1:%d", client)
}

func freePort(t *testing.T) int {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}
