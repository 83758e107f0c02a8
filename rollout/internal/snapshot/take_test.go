package snapshot

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/etcd-rollout/pulumi-etcd-rollout/rollout/internal/snapshot/snapshottest"
)

// fileSource streams a prepared snapshot file as a member would.
func fileSource(file string, clusterID uint64) Source {
	return func(ctx context.Context, consume func(Stream) error) error {
		body, err := os.ReadFile(file)
		if err != nil {
			return err
		}
		return consume(Stream{Data: bytes.NewReader(body), Revision: 40, StorageVersion: "3.6.0", ClusterID: clusterID})
	}
}

func TestTakeStoresAVerifiedSnapshotOnlyItsOwnerCanRead(t *testing.T) {
	root := filepath.Join(t.TempDir(), "backups")
	dest, err := Parse("file://" + root)
	require.NoError(t, err)
	var reports []Progress
	rec, err := Take(context.Background(), fileSource(snapshottest.File(t, 40, "3.6.0"), 0xabc), dest, Options{
		Key: "db/etcd/20261205T014106Z.db", Member: "etcd-1", EtcdVersion: "3.6.8", ExpectedSize: 1 << 20,
		RevisionBefore: 39, Progress: func(p Progress) { reports = append(reports, p) }, ProgressEvery: time.Nanosecond,
	})
	require.NoError(t, err)
	assert.Equal(t, "file://"+root+"/db/etcd/20261205T014106Z.db", rec.Location)
	assert.Equal(t, int64(40), rec.Revision)
	assert.Equal(t, "abc", rec.ClusterID)
	assert.Equal(t, "etcd-1", rec.Member)
	assert.NotEmpty(t, reports, "progress was reported")

	stored := filepath.Join(root, "db", "etcd", "20261205T014106Z.db")
	facts, err := Verify(stored)
	require.NoError(t, err, "the stored copy verifies on its own")
	assert.Equal(t, rec.Facts, facts)
	body, err := os.ReadFile(stored + ".json")
	require.NoError(t, err)
	var kept Record
	require.NoError(t, json.Unmarshal(body, &kept))
	assert.Equal(t, rec.SHA256, kept.SHA256, "the record next to the snapshot")

	for _, dir := range []string{root, filepath.Join(root, "db"), filepath.Join(root, "db", "etcd")} {
		assertMode(t, dir, 0o700)
	}
	for _, file := range []string{stored, stored + ".json"} {
		assertMode(t, file, 0o600)
	}
	entries, err := os.ReadDir(filepath.Join(root, "db", "etcd"))
	require.NoError(t, err)
	assert.Len(t, entries, 2, "nothing else left in the directory (no attribute sidecars, no temporary files)")
}

func assertMode(t *testing.T, path string, want os.FileMode) {
	info, err := os.Stat(path)
	require.NoError(t, err)
	assert.Equal(t, want, info.Mode().Perm(), path)
}

// Each refusal stores nothing and leaves no spool behind.
func TestTakeRefusesASnapshotItCannotVouchFor(t *testing.T) {
	for _, tc := range []struct {
		name   string
		source func(t *testing.T) Source
		opts   Options
		want   error
	}{
		{"one byte flipped on the way", func(t *testing.T) Source {
			file := snapshottest.File(t, 40, "3.6.0")
			flipByte(t, file, 9000)
			return fileSource(file, 1)
		}, Options{}, ErrCorrupt},
		{"older than the revision read before it", func(t *testing.T) Source {
			return fileSource(snapshottest.File(t, 40, "3.6.0"), 1)
		}, Options{RevisionBefore: 41}, ErrStale},
		{"larger than the free space", func(t *testing.T) Source {
			return func(context.Context, func(Stream) error) error {
				t.Error("the member was asked for a snapshot that cannot fit")
				return nil
			}
		}, Options{ExpectedSize: 1 << 60}, ErrNoSpace},
		{"the stream breaks", func(t *testing.T) Source {
			return func(ctx context.Context, consume func(Stream) error) error {
				return consume(Stream{Data: &failingReader{}})
			}
		}, Options{}, errStreamBroke},
	} {
		t.Run(tc.name, func(t *testing.T) {
			root, spool := filepath.Join(t.TempDir(), "backups"), t.TempDir()
			dest, err := Parse("file://" + root)
			require.NoError(t, err)
			opts := tc.opts
			opts.Key, opts.Member, opts.SpoolDir = "db/etcd/x.db", "etcd-0", spool
			_, err = Take(context.Background(), tc.source(t), dest, opts)
			require.ErrorIs(t, err, tc.want)
			_, statErr := os.Stat(filepath.Join(root, "db", "etcd", "x.db"))
			assert.True(t, os.IsNotExist(statErr), "nothing stored")
			left, _ := os.ReadDir(spool)
			assert.Empty(t, left, "no spool left behind")
		})
	}
}

var errStreamBroke = errors.New("stream broke")

type failingReader struct{ n int }

func (r *failingReader) Read(p []byte) (int, error) {
	if r.n++; r.n > 3 {
		return 0, errStreamBroke
	}
	return len(p), nil
}

// A file destination's object is written beside it, never in $TMPDIR, and is its owner's alone before its
// first byte (review 3, item 7: fileblob's temporary file sat 0644 in $TMPDIR, left behind by a kill, and
// failed the rename with EXDEV where $TMPDIR is another file system). $TMPDIR here does not exist: the old
// store failed on it.
func TestAFileDestinationWritesOwnerOnlyBesideTheObjectNeverInTMPDIR(t *testing.T) {
	t.Setenv("TMPDIR", filepath.Join(t.TempDir(), "no-such-dir"))
	root := filepath.Join(t.TempDir(), "backups")
	dest, err := Parse("file://" + root)
	require.NoError(t, err)
	ctx := context.Background()
	bucket, err := dest.open(ctx)
	require.NoError(t, err)
	defer bucket.Close()

	w, err := bucket.NewWriter(ctx, "etcd/partial.db", dest.writerOptions("application/octet-stream"))
	require.NoError(t, err)
	_, err = w.Write([]byte("the keyspace"))
	require.NoError(t, err)
	pending, err := filepath.Glob(filepath.Join(root, "etcd", "partial.db.*.tmp"))
	require.NoError(t, err)
	require.Len(t, pending, 1, "the object is written beside where it goes")
	assertMode(t, pending[0], 0o600)
	require.NoError(t, w.Close())
	assertMode(t, filepath.Join(root, "etcd", "partial.db"), 0o600)

	rec, err := Take(ctx, fileSource(snapshottest.File(t, 40, "3.6.0"), 0xabc), dest, Options{
		Key: "db/etcd/20261206T220000Z.db", Member: "etcd-1", ExpectedSize: 1 << 20, SpoolDir: t.TempDir(),
	})
	require.NoError(t, err, "a snapshot is stored whatever $TMPDIR is")
	assert.Equal(t, int64(40), rec.Revision)
}
