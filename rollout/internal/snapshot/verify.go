package snapshot

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"

	bolt "go.etcd.io/bbolt"
)

// ErrCorrupt is wrapped when a snapshot file fails a check: its trailing sha256, or its bbolt structure.
var ErrCorrupt = errors.New("snapshot is corrupt")

// Facts is what a verified snapshot file says about itself.
type Facts struct {
	// Size is the file's size in bytes, SHA256 the hex sha256 of the whole file (what `sha256sum` prints).
	Size   int64  `json:"sizeBytes"`
	SHA256 string `json:"sha256"`
	// Revision is the newest revision of the key-value store in the file; ConsistentIndex the last Raft
	// entry applied to it.
	Revision        int64  `json:"revision"`
	ConsistentIndex uint64 `json:"consistentIndex"`
	// StorageVersion is the schema version the file records ("3.6.0"); empty for a file written before 3.6.
	StorageVersion string `json:"storageVersion,omitempty"`
}

// The buckets and keys of etcd's backend that Verify reads (etcd's server/storage/schema).
var (
	keyBucket         = []byte("key")
	metaBucket        = []byte("meta")
	consistentIndex   = []byte("consistent_index")
	finishedCompact   = []byte("finishedCompactRev")
	storageVersionKey = []byte("storageVersion")
)

// Verify checks a snapshot file as etcd wrote it: the sha256 etcd appends after the bbolt file matches what
// precedes it (what `etcdutl snapshot restore` checks), and bbolt's own consistency check passes on every
// page (what a restore would otherwise find out member by member). It reads the file; it never writes it.
func Verify(file string) (Facts, error) {
	size, whole, err := checkTrailer(file)
	if err != nil {
		return Facts{}, err
	}
	facts := Facts{Size: size, SHA256: whole}
	db, err := bolt.Open(file, 0o400, &bolt.Options{ReadOnly: true})
	if err != nil {
		return Facts{}, fmt.Errorf("%w: bbolt cannot open it: %v", ErrCorrupt, err)
	}
	defer db.Close()
	err = db.View(func(tx *bolt.Tx) error {
		var problems []error
		for p := range tx.Check() {
			problems = append(problems, p)
		}
		if len(problems) > 0 {
			return fmt.Errorf("%w: bbolt's check found %d problem(s), the first: %v", ErrCorrupt, len(problems), problems[0])
		}
		return readFacts(tx, &facts)
	})
	return facts, err
}

// checkTrailer recomputes the sha256 etcd appended to the snapshot, and the whole file's, in one read.
func checkTrailer(file string) (int64, string, error) {
	f, err := os.Open(file)
	if err != nil {
		return 0, "", err
	}
	defer f.Close()
	info, err := f.Stat()
	if err != nil {
		return 0, "", err
	}
	size := info.Size()
	// etcd's rule: a bbolt file is whole pages (a multiple of 512 bytes), so a snapshot with its checksum
	// is 32 bytes over one.
	if size%512 != sha256.Size {
		return 0, "", fmt.Errorf("%w: %d bytes is not a bbolt file followed by etcd's sha256 (a transfer cut short?)", ErrCorrupt, size)
	}
	body, whole := sha256.New(), sha256.New()
	if _, err := io.Copy(io.MultiWriter(body, whole), io.LimitReader(f, size-sha256.Size)); err != nil {
		return 0, "", err
	}
	trailer := make([]byte, sha256.Size)
	if _, err := io.ReadFull(f, trailer); err != nil {
		return 0, "", err
	}
	whole.Write(trailer)
	if !bytes.Equal(body.Sum(nil), trailer) {
		return 0, "", fmt.Errorf("%w: its data does not match the sha256 etcd sent with it", ErrCorrupt)
	}
	return size, hex.EncodeToString(whole.Sum(nil)), nil
}

// readFacts reads the newest revision (the last key of the key bucket: 8 bytes of main revision, big-endian,
// then the sub-revision; or the last compaction's), the consistent index and the storage version.
func readFacts(tx *bolt.Tx, facts *Facts) error {
	keys := tx.Bucket(keyBucket)
	meta := tx.Bucket(metaBucket)
	if keys == nil || meta == nil {
		return fmt.Errorf("%w: it has no etcd key or meta bucket (not an etcd v3 snapshot?)", ErrCorrupt)
	}
	// As etcd's own restore takes it: the newest key revision, or the last compaction's when that is newer, and
	// 1 for a store nothing was ever written to (its key bucket is empty).
	facts.Revision = 1
	if k, _ := keys.Cursor().Last(); len(k) >= 8 {
		facts.Revision = max(facts.Revision, int64(binary.BigEndian.Uint64(k[:8])))
	}
	if v := meta.Get(finishedCompact); len(v) >= 8 {
		facts.Revision = max(facts.Revision, int64(binary.BigEndian.Uint64(v[:8])))
	}
	if v := meta.Get(consistentIndex); len(v) == 8 {
		facts.ConsistentIndex = binary.BigEndian.Uint64(v)
	}
	facts.StorageVersion = string(meta.Get(storageVersionKey))
	return nil
}
