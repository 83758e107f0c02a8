package member

import (
	"context"
	"fmt"
	"io"
)

// SnapshotStream is one snapshot as etcd streams it: its bbolt file followed by the file's sha256, which is
// how `etcdutl snapshot restore` tells an intact snapshot from a truncated one.
type SnapshotStream struct {
	Data io.Reader
	// Revision is the serving member's revision when the stream began.
	Revision int64
	// StorageVersion is the version of the data's schema ("3.6.0"), which etcd sends from 3.6 on; empty before.
	StorageVersion string
	ClusterID      uint64
	MemberID       uint64
}

// Snapshot streams a point-in-time snapshot of pod's data to consume, over the member's own single-endpoint
// client (through the same port-forward as every other call), and ends the stream when consume returns. It
// is a callback rather than a reader handed back, so that the stream never outlives the forward it runs on.
func (m *Clients) Snapshot(ctx context.Context, pod string, consume func(SnapshotStream) error) error {
	return m.read(ctx, pod, func(ctx context.Context, c *memberClient) error {
		resp, err := c.cli.SnapshotWithVersion(ctx)
		if err != nil {
			return fmt.Errorf("snapshot of %s: %w", pod, m.explainTLS(pod, explain(ctx, err)))
		}
		defer resp.Snapshot.Close()
		stream := SnapshotStream{Data: resp.Snapshot, Revision: resp.Header.GetRevision(), StorageVersion: resp.Version,
			ClusterID: resp.Header.GetClusterId(), MemberID: resp.Header.GetMemberId()}
		if err := consume(stream); err != nil {
			return fmt.Errorf("snapshot of %s: %w", pod, explain(ctx, err))
		}
		return nil
	})
}
