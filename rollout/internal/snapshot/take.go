package snapshot

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"time"

	"gocloud.dev/blob"
)

// ErrNoSpace is wrapped when the spool or the destination directory has too little room for the snapshot.
var ErrNoSpace = errors.New("not enough free space for the snapshot")

// ErrStale is wrapped when a snapshot's newest revision is older than the one read just before it began:
// it cannot be the cluster as it stood, so it is no rollback path.
var ErrStale = errors.New("snapshot is older than the cluster")

// Stream is one snapshot as a member sends it: the bbolt file followed by its sha256.
type Stream struct {
	Data           io.Reader
	Revision       int64
	StorageVersion string
	ClusterID      uint64
}

// Source streams one snapshot of a member to consume and ends the stream when consume returns.
type Source func(ctx context.Context, consume func(Stream) error) error

// Options says which snapshot Take takes and what it must hold.
type Options struct {
	// Key names the object under the destination ("db/etcd/20261205T014106Z.db"); its record is Key+".json".
	Key string
	// Member is the pod the Source streams from, EtcdVersion its server version: both go in the record.
	Member, EtcdVersion string
	// ExpectedSize is the member's database size read just before (what the free-space checks need);
	// RevisionBefore the revision read just before, which the snapshot must hold at least.
	ExpectedSize   int64
	RevisionBefore int64
	// SpoolDir is where the snapshot is verified before it is stored; the system's temporary directory when
	// empty.
	SpoolDir string
	// Progress, when set, is called about every ProgressEvery (default 5 s) while the snapshot streams.
	Progress      func(Progress)
	ProgressEvery time.Duration
}

// Take streams a snapshot from src to a spool file, verifies it (etcd's sha256, bbolt's check, its revision
// against RevisionBefore), stores it at dest under opts.Key with its record, reads the stored copy back and
// compares it. It returns the record only when all of that passed; the spool is removed on every path.
func Take(ctx context.Context, src Source, dest *Destination, opts Options) (Record, error) {
	if err := precheck(dest, opts); err != nil {
		return Record{}, err
	}
	bucket, err := dest.open(ctx)
	if err != nil {
		return Record{}, err
	}
	defer bucket.Close()
	spool, err := os.MkdirTemp(opts.SpoolDir, "etcd-snapshot-")
	if err != nil {
		return Record{}, fmt.Errorf("create a spool directory for the snapshot: %w", err)
	}
	defer os.RemoveAll(spool)
	file := filepath.Join(spool, "snapshot.db")
	start := time.Now()
	stream, err := receive(ctx, src, file, opts)
	if err != nil {
		return Record{}, err
	}
	elapsed := time.Since(start)
	facts, err := Verify(file)
	if err != nil {
		return Record{}, fmt.Errorf("the snapshot from %s failed its check; nothing was stored: %w", opts.Member, err)
	}
	if facts.Revision < opts.RevisionBefore {
		return Record{}, fmt.Errorf("%w: its newest revision is %d, the cluster was at %d just before it began", ErrStale, facts.Revision, opts.RevisionBefore)
	}
	rec := Record{Location: dest.Location(opts.Key), Member: opts.Member, EtcdVersion: opts.EtcdVersion,
		ClusterID: strconv.FormatUint(stream.ClusterID, 16), Facts: facts, RevisionBefore: opts.RevisionBefore,
		TakenAt: start.UTC(), Seconds: elapsed.Seconds(), MBPerSecond: float64(facts.Size) / (1 << 20) / max(elapsed.Seconds(), 1e-3)}
	if rec.StorageVersion == "" {
		rec.StorageVersion = stream.StorageVersion
	}
	if err := store(ctx, bucket, dest, opts.Key, file, rec); err != nil {
		return Record{}, err
	}
	return rec, nil
}

// precheck refuses what would fail anyway, before the member is asked for anything.
func precheck(dest *Destination, opts Options) error {
	if opts.Key == "" {
		return errors.New("a snapshot needs a key to be stored under")
	}
	spool := opts.SpoolDir
	if spool == "" {
		spool = os.TempDir()
	}
	if err := checkSpace(spool, opts.ExpectedSize, "the spool directory"); err != nil {
		return err
	}
	if dir := dest.LocalDir(); dir != "" {
		if err := os.MkdirAll(dir, 0o700); err != nil {
			return fmt.Errorf("create the snapshot directory %s: %w", dir, err)
		}
		return checkSpace(dir, opts.ExpectedSize, "the snapshot directory")
	}
	return nil
}

// receive writes the stream to file (0600) and syncs it.
func receive(ctx context.Context, src Source, file string, opts Options) (Stream, error) {
	f, err := os.OpenFile(file, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o600)
	if err != nil {
		return Stream{}, err
	}
	defer f.Close()
	every := opts.ProgressEvery
	if every <= 0 {
		every = 5 * time.Second
	}
	progress := &progressWriter{expected: opts.ExpectedSize, report: opts.Progress, interval: every, start: time.Now(), last: time.Now()}
	var got Stream
	err = src(ctx, func(s Stream) error {
		got = s
		_, err := io.Copy(io.MultiWriter(f, progress), s.Data)
		return err
	})
	if err != nil {
		return Stream{}, fmt.Errorf("stream the snapshot from %s: %w", opts.Member, err)
	}
	if err := f.Sync(); err != nil {
		return Stream{}, err
	}
	return got, f.Close()
}

// store copies the verified file to the bucket, reads it back and compares its sha256, then writes the record
// next to it. A file destination's objects are 0600 from their first byte (Destination.writerOptions).
func store(ctx context.Context, bucket *blob.Bucket, dest *Destination, key, file string, rec Record) error {
	if err := upload(ctx, bucket, key, file, dest.writerOptions("application/octet-stream")); err != nil {
		return fmt.Errorf("store the snapshot at %s: %w", rec.Location, err)
	}
	if err := compareStored(ctx, bucket, key, rec.Facts); err != nil {
		return fmt.Errorf("the snapshot stored at %s does not read back as written: %w", rec.Location, err)
	}
	body, err := json.MarshalIndent(rec, "", "  ")
	if err != nil {
		return err
	}
	if err := bucket.WriteAll(ctx, key+".json", append(body, '\n'), dest.writerOptions("application/json")); err != nil {
		return fmt.Errorf("store the snapshot's record at %s.json: %w", rec.Location, err)
	}
	return nil
}

func upload(ctx context.Context, bucket *blob.Bucket, key, file string, opts *blob.WriterOptions) error {
	f, err := os.Open(file)
	if err != nil {
		return err
	}
	defer f.Close()
	return bucket.Upload(ctx, key, f, opts)
}

// compareStored reads the stored object back and checks it is the verified file, byte for byte by sha256.
func compareStored(ctx context.Context, bucket *blob.Bucket, key string, want Facts) error {
	r, err := bucket.NewReader(ctx, key, nil)
	if err != nil {
		return err
	}
	defer r.Close()
	h := sha256.New()
	n, err := io.Copy(h, r)
	if err != nil {
		return err
	}
	if got := hex.EncodeToString(h.Sum(nil)); n != want.Size || got != want.SHA256 {
		return fmt.Errorf("%w: read back %d bytes with sha256 %s, wrote %d with %s", ErrCorrupt, n, got, want.Size, want.SHA256)
	}
	return nil
}
