package snapshot

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"os"
	"path"
	"path/filepath"
	"strings"

	"gocloud.dev/blob"
	"gocloud.dev/blob/fileblob"

	// The object stores a destination URL may name; each takes its credentials from its SDK's usual sources.
	_ "gocloud.dev/blob/azureblob"
	_ "gocloud.dev/blob/gcsblob"
	_ "gocloud.dev/blob/s3blob"
)

// ErrBadDestination is wrapped by every refusal of a destination URL, before anything is streamed.
var ErrBadDestination = errors.New("snapshot destination refused")

// Destination is where snapshots are stored: a parsed, checked URL. It never carries a secret (Parse refuses
// one), so its String is safe to log, to show in preview and to keep in plain state.
type Destination struct {
	url *url.URL
	// dir is the local directory of a file:// destination; empty for an object store.
	dir string
}

// noServerSideEncryption is this package's own query parameter: an S3-compatible store that refuses the
// SSE-S3 header is written without it. It is removed before the URL reaches gocloud.
const noServerSideEncryption = "sse"

// secretParams are parts of query parameter names that carry credentials; a URL with one is refused, because
// the URL reaches the outputs, the logs and the status ConfigMap.
var secretParams = []string{"secret", "password", "passwd", "token", "signature", "sig", "credential", "access_key", "accesskey"}

// Parse checks a destination: a plain path or file:// URL (a directory on this machine), or s3://, gs://,
// azblob://. It refuses a URL that carries credentials (user info, or a parameter named like one).
func Parse(raw string) (*Destination, error) {
	if strings.TrimSpace(raw) == "" {
		return nil, fmt.Errorf("%w: the URL is empty; give a directory (file:///var/backups/etcd) or a bucket (s3://bucket?region=…)", ErrBadDestination)
	}
	if !strings.Contains(raw, "://") {
		abs, err := filepath.Abs(raw)
		if err != nil {
			return nil, fmt.Errorf("%w: %q is not a usable directory: %v", ErrBadDestination, raw, err)
		}
		raw = (&url.URL{Scheme: "file", Path: filepath.ToSlash(abs)}).String()
	}
	u, err := url.Parse(raw)
	if err != nil {
		return nil, fmt.Errorf("%w: not a URL: %v", ErrBadDestination, errors.Unwrap(err))
	}
	if u.User != nil {
		return nil, fmt.Errorf("%w: the URL carries user info; give the store's credentials through its usual sources (environment, workload identity, its config files), never in the URL, which is logged and kept in state", ErrBadDestination)
	}
	for name := range u.Query() {
		for _, s := range secretParams {
			if strings.Contains(strings.ToLower(name), s) {
				return nil, fmt.Errorf("%w: the URL's parameter %q looks like a credential; give the store's credentials through its usual sources, never in the URL, which is logged and kept in state", ErrBadDestination, name)
			}
		}
	}
	d := &Destination{url: u}
	switch u.Scheme {
	case "file":
		if u.Host != "" && u.Host != "localhost" {
			return nil, fmt.Errorf("%w: file://%s%s names a host; a file destination is a directory on this machine (file:///path)", ErrBadDestination, u.Host, u.Path)
		}
		if u.Path == "" || !path.IsAbs(u.Path) {
			return nil, fmt.Errorf("%w: file:// needs an absolute directory (file:///var/backups/etcd)", ErrBadDestination)
		}
		d.dir = filepath.FromSlash(u.Path)
	case "s3", "gs", "azblob":
		if u.Host == "" {
			return nil, fmt.Errorf("%w: %s:// needs a bucket name (%s://bucket)", ErrBadDestination, u.Scheme, u.Scheme)
		}
	default:
		return nil, fmt.Errorf("%w: scheme %q is not one of file, s3, gs, azblob", ErrBadDestination, u.Scheme)
	}
	return d, nil
}

// writerOptions are the options every object is written with: for a directory, the file is made readable by
// its owner only before anything is written to it (fileblob creates it 0666 less the umask).
func (d *Destination) writerOptions(contentType string) *blob.WriterOptions {
	opts := &blob.WriterOptions{ContentType: contentType}
	if d.dir != "" {
		opts.BeforeWrite = ownerOnly
	}
	return opts
}

// ownerOnly makes the file fileblob is about to write 0600; it fails the write where the file cannot be had.
func ownerOnly(as func(any) bool) error {
	var f *os.File
	if !as(&f) {
		return errors.New("the snapshot file could not be restricted to its owner: the file store did not hand over its file")
	}
	if err := f.Chmod(0o600); err != nil {
		return fmt.Errorf("restrict the snapshot file to its owner: %w", err)
	}
	return nil
}

// String is the destination's URL, safe to show (Parse refused any credential in it).
func (d *Destination) String() string { return d.url.String() }

// LocalDir is the directory of a file destination, empty for an object store.
func (d *Destination) LocalDir() string { return d.dir }

// Location names one stored object: the destination without its options, and the object's key under it.
func (d *Destination) Location(key string) string {
	u := url.URL{Scheme: d.url.Scheme, Host: d.url.Host}
	u.Path = path.Join("/", d.url.Path, d.url.Query().Get("prefix")+key)
	return u.String()
}

// storeURL is the URL gocloud opens: S3 is asked for server-side encryption (SSE-S3) unless the URL chooses
// its own (ssetype, kmskeyid) or says sse=none, which is this package's parameter and removed.
func (d *Destination) storeURL() url.URL {
	u := *d.url
	q := u.Query()
	sse := q.Get(noServerSideEncryption)
	q.Del(noServerSideEncryption)
	if u.Scheme == "s3" && sse != "none" && q.Get("ssetype") == "" {
		q.Set("ssetype", "AES256")
	}
	u.RawQuery = q.Encode()
	return u
}

// open opens the destination's bucket (storeURL). A directory is created 0700 with every subdirectory a key
// needs, and no attribute sidecars. fileblob writes each object to a temporary file that it renames into
// place: NoTempDir puts that file beside the object, not in $TMPDIR, where the whole keyspace would sit
// readable by others while it is copied, be left behind by a kill, and fail the rename with EXDEV when
// $TMPDIR is another file system (ownerOnly makes it 0600 before its first byte).
func (d *Destination) open(ctx context.Context) (*blob.Bucket, error) {
	u := d.storeURL()
	q := u.Query()
	if d.dir != "" {
		if err := os.MkdirAll(d.dir, 0o700); err != nil {
			return nil, fmt.Errorf("create the snapshot directory %s: %w", d.dir, err)
		}
		b, err := fileblob.OpenBucket(d.dir, &fileblob.Options{DirFileMode: 0o700, Metadata: fileblob.MetadataDontWrite, NoTempDir: true})
		if err != nil {
			return nil, fmt.Errorf("open the snapshot directory %s: %w", d.dir, err)
		}
		if prefix := q.Get("prefix"); prefix != "" {
			b = blob.PrefixedBucket(b, prefix)
		}
		return b, nil
	}
	b, err := blob.OpenBucket(ctx, (&u).String())
	if err != nil {
		return nil, fmt.Errorf("open the snapshot destination %s: %w", d, err)
	}
	return b, nil
}
