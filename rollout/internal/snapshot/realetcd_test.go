package snapshot

import (
	"context"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/etcd-rollout/pulumi-etcd-rollout/rollout/internal/member"
	"github.com/etcd-rollout/pulumi-etcd-rollout/rollout/internal/testetcd"
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
			endpoint := testetcd.StartAlone(t, testetcd.Binary(t, tc.binary), "etcd-0").ClientAddr()
			cli, err := clientv3.New(clientv3.Config{Endpoints: []string{endpoint}, DialTimeout: 5 * time.Second})
			require.NoError(t, err)
			defer cli.Close()
			require.NoError(t, tc.fill(ctx, cli))
			clients := member.NewClients(testetcd.Dialer{"etcd-0": endpoint}, "db", "etcd", 2379, nil)
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
