package rollout

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The engine takes a snapshot from the leader only, and refuses before asking anyone when the destination is
// bad or no healthy leader can vouch for it. Its success against real etcd is in tests/engine.
func TestASnapshotComesFromTheLeaderOrNotAtAll(t *testing.T) {
	for _, tc := range []struct {
		name      string
		dest      func(dir string) string
		setup     func(c *fakeCluster)
		wantErr   error
		wantText  string
		wantAsked []string
	}{
		{name: "a stream that fails its check is not stored", dest: func(dir string) string { return dir },
			setup:   func(c *fakeCluster) { c.etcd.snapshot = make([]byte, 4096+32) },
			wantErr: ErrSnapshotCorrupt, wantText: "does not match the sha256", wantAsked: []string{"etcd-1"}},
		{name: "a destination with a credential", dest: func(string) string { return "s3://bucket?aws_secret_access_key=x" },
			wantErr: ErrBadSnapshotDestination, wantText: "looks like a credential"},
		{name: "no healthy leader", dest: func(dir string) string { return dir },
			setup:    func(c *fakeCluster) { c.etcd.down["etcd-1"] = true },
			wantText: "no member is a healthy leader"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := newFakeCluster(t, 3, 1)
			if tc.setup != nil {
				tc.setup(c)
			}
			dir := filepath.Join(t.TempDir(), "backups")
			_, err := c.engine(t, nil).Snapshot(context.Background(), SnapshotOptions{Destination: tc.dest(dir), SpoolDir: t.TempDir()})
			require.Error(t, err)
			if tc.wantErr != nil {
				require.ErrorIs(t, err, tc.wantErr)
			}
			assert.Contains(t, err.Error(), tc.wantText)
			assert.Equal(t, tc.wantAsked, c.etcd.snapshotsFrom, "members asked for a snapshot")
			stored, _ := filepath.Glob(filepath.Join(dir, "db", "etcd", "*"))
			assert.Empty(t, stored, "nothing stored")
		})
	}
}
