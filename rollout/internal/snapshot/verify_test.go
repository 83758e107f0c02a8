package snapshot

import (
	"crypto/sha256"
	"os"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/etcd-rollout/pulumi-etcd-rollout/rollout/internal/snapshot/snapshottest"
	bolt "go.etcd.io/bbolt"
)

func TestVerifyReadsAnIntactSnapshot(t *testing.T) {
	file := snapshottest.File(t, 40, "3.6.0")
	facts, err := Verify(file)
	require.NoError(t, err)
	assert.Equal(t, int64(40), facts.Revision)
	assert.Equal(t, uint64(50), facts.ConsistentIndex)
	assert.Equal(t, "3.6.0", facts.StorageVersion)
	body, err := os.ReadFile(file)
	require.NoError(t, err)
	assert.Equal(t, int64(len(body)), facts.Size)
	assert.Len(t, facts.SHA256, 64)
}

// Each way a snapshot file can be broken on its way, and that Verify names it corrupt.
func TestVerifyRefusesABrokenSnapshot(t *testing.T) {
	for _, tc := range []struct {
		name   string
		break_ func(t *testing.T, file string)
		says   string
	}{
		{"one byte flipped in the data", func(t *testing.T, file string) { flipByte(t, file, 5000) },
			"does not match the sha256 etcd sent"},
		{"one byte flipped in the checksum", func(t *testing.T, file string) { flipByte(t, file, -1) },
			"does not match the sha256 etcd sent"},
		{"cut short mid-page", func(t *testing.T, file string) { truncateBy(t, file, 1000) }, "a transfer cut short"},
		{"cut short by whole pages", func(t *testing.T, file string) { truncateBy(t, file, 4096) }, "does not match the sha256"},
		{"no checksum", func(t *testing.T, file string) { truncateBy(t, file, sha256.Size) }, "a transfer cut short"},
		{"a page overwritten, with a checksum that matches", func(t *testing.T, file string) {
			truncateBy(t, file, sha256.Size)
			zeroPage(t, file, keyBucketRoot(t, file))
			snapshottest.AppendChecksum(t, file)
		}, "bbolt's check found"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			file := snapshottest.File(t, 40, "3.6.0")
			tc.break_(t, file)
			_, err := Verify(file)
			require.ErrorIs(t, err, ErrCorrupt)
			assert.Contains(t, err.Error(), tc.says)
		})
	}
}

// flipByte inverts the byte at offset (from the end when negative).
func flipByte(t *testing.T, file string, offset int) {
	body, err := os.ReadFile(file)
	require.NoError(t, err)
	if offset < 0 {
		offset += len(body)
	}
	body[offset] ^= 0xff
	require.NoError(t, os.WriteFile(file, body, 0o600))
}

func truncateBy(t *testing.T, file string, n int64) {
	info, err := os.Stat(file)
	require.NoError(t, err)
	require.NoError(t, os.Truncate(file, info.Size()-n))
}

// keyBucketRoot is the page the key bucket's tree starts at.
func keyBucketRoot(t *testing.T, file string) int {
	db, err := bolt.Open(file, 0o400, &bolt.Options{ReadOnly: true})
	require.NoError(t, err)
	defer db.Close()
	var root int
	require.NoError(t, db.View(func(tx *bolt.Tx) error {
		root = int(tx.Bucket(keyBucket).Root())
		return nil
	}))
	return root
}

// zeroPage overwrites one bbolt page with zeros, which bbolt's check must notice when it walks the tree.
func zeroPage(t *testing.T, file string, page int) {
	body, err := os.ReadFile(file)
	require.NoError(t, err)
	size := os.Getpagesize()
	copy(body[page*size:(page+1)*size], make([]byte, size))
	require.NoError(t, os.WriteFile(file, body, 0o600))
}
