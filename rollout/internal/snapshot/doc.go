// Package snapshot takes, verifies and stores an etcd snapshot: the rollback path before a point of no return
// (a minor-version change, a one-member restart), and what `etcd-rollout snapshot` writes on demand.
//
// A snapshot holds every key of the cluster, a Kubernetes etcd's Secrets included, so it is streamed, never
// held in memory: to a spool file (0600, in a fresh 0700 directory) where it is verified, then to its
// destination, then read back and compared. The destination is a URL opened with gocloud.dev/blob: a directory
// (file://, or a plain path), or an object store (s3://, gs://, azblob://) with credentials only from the
// store's usual sources, never from the URL.
//
// It makes no Kubernetes or etcd call itself: the engine hands it the member's snapshot stream (a Source).
package snapshot
