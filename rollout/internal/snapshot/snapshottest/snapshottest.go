// Package snapshottest writes small snapshot files laid out as etcd's are, for tests that need one without a
// running etcd (the engine's fakes), or that break one in chosen ways. Snapshots of real etcd members are
// taken in the snapshot package's own tests.
package snapshottest

import (
	"crypto/sha256"
	"encoding/binary"
	"os"
	"path/filepath"
	"testing"

	bolt "go.etcd.io/bbolt"
)

// File writes a bbolt file laid out as etcd's backend is (a "key" bucket keyed by revision, a "meta" bucket
// with the consistent index, revision+10, and the storage version when not empty), with keys up to revision,
// followed by its sha256 as etcd streams it, and returns its path.
func File(t testing.TB, revision int64, storageVersion string) string {
	t.Helper()
	file := filepath.Join(t.TempDir(), "snapshot.db")
	db, err := bolt.Open(file, 0o600, nil)
	if err != nil {
		t.Fatal(err)
	}
	err = db.Update(func(tx *bolt.Tx) error {
		keys, err := tx.CreateBucket([]byte("key"))
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
		meta, err := tx.CreateBucket([]byte("meta"))
		if err != nil {
			return err
		}
		ci := make([]byte, 8)
		binary.BigEndian.PutUint64(ci, uint64(revision+10))
		if err := meta.Put([]byte("consistent_index"), ci); err != nil {
			return err
		}
		if storageVersion != "" {
			return meta.Put([]byte("storageVersion"), []byte(storageVersion))
		}
		return nil
	})
	if err == nil {
		err = db.Close()
	}
	if err != nil {
		t.Fatal(err)
	}
	AppendChecksum(t, file)
	return file
}

// Bytes is File's content.
func Bytes(t testing.TB, revision int64, storageVersion string) []byte {
	t.Helper()
	body, err := os.ReadFile(File(t, revision, storageVersion))
	if err != nil {
		t.Fatal(err)
	}
	return body
}

// AppendChecksum appends the sha256 of file's content, as etcd does at the end of a snapshot stream.
func AppendChecksum(t testing.TB, file string) {
	t.Helper()
	body, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(body)
	if err := os.WriteFile(file, append(body, sum[:]...), 0o600); err != nil {
		t.Fatal(err)
	}
}
