package snapshot

import (
	"crypto/sha256"
	"encoding/binary"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
	bolt "go.etcd.io/bbolt"
)

// etcdLikeSnapshot writes a bbolt file laid out as etcd's backend is (a key bucket keyed by revision, a meta
// bucket), with keys up to revision, followed by its sha256 as etcd streams it; it returns the file's path.
// Real etcd snapshots are taken in realetcd_test.go; this one lets a test break a file in chosen ways.
func etcdLikeSnapshot(t *testing.T, revision int64, storageVersion string) string {
	t.Helper()
	dir := t.TempDir()
	file := filepath.Join(dir, "snapshot.db")
	db, err := bolt.Open(file, 0o600, nil)
	require.NoError(t, err)
	require.NoError(t, db.Update(func(tx *bolt.Tx) error {
		keys, err := tx.CreateBucket(keyBucket)
		if err != nil {
			return err
		}
		for rev := int64(1); rev <= revision; rev++ {
			k := make([]byte, 17)
			binary.BigEndian.PutUint64(k, uint64(rev))
			k[8] = '_'
			if err := keys.Put(k, make([]byte, 300)); err != nil {
				return err
			}
		}
		meta, err := tx.CreateBucket(metaBucket)
		if err != nil {
			return err
		}
		ci := make([]byte, 8)
		binary.BigEndian.PutUint64(ci, uint64(revision+10))
		if err := meta.Put(consistentIndex, ci); err != nil {
			return err
		}
		if storageVersion != "" {
			return meta.Put(storageVersionKey, []byte(storageVersion))
		}
		return nil
	}))
	require.NoError(t, db.Close())
	appendChecksum(t, file)
	return file
}

// appendChecksum appends the sha256 of file's content, as etcd does at the end of a snapshot stream.
func appendChecksum(t *testing.T, file string) {
	t.Helper()
	body, err := os.ReadFile(file)
	require.NoError(t, err)
	sum := sha256.Sum256(body)
	require.NoError(t, os.WriteFile(file, append(body, sum[:]...), 0o600))
}
