package engineroll

import (
	"context"
	"path/filepath"
	"time"

	"k8s.io/client-go/rest"

	"github.com/etcd-rollout/pulumi-etcd-rollout/rollout"
)

// SnapshotRun is one snapshot the engine took through its port-forward, as a run before a point of no return
// takes it: streamed from the leader to a spool file, verified, stored, read back.
type SnapshotRun struct {
	Record rollout.SnapshotRecord `json:"record"`
	Err    string                 `json:"err,omitempty"`
	// Wall is the whole Engine.Snapshot call: the transfer (Record.Seconds), the check and the store.
	Wall time.Duration `json:"wall"`
	// MaxRSSKB is the peak resident set of the process, in KiB: a snapshot is streamed, so it must not grow
	// with the database.
	MaxRSSKB int64 `json:"maxRSSKB"`
	// GoMemory is the Go runtime's own account at its largest: what of the peak RSS is heap. The rest of it
	// is mostly the snapshot file's pages that bbolt's check maps (file-backed, reclaimable by the kernel).
	GoMemory GoMemory `json:"goMemory"`
	PeakRSS
}

// snapshotOnce takes one snapshot of target t to the directory dir, spooled in its parent (which exists).
func snapshotOnce(ctx context.Context, rc *rest.Config, t Target, dir string) SnapshotRun {
	var run SnapshotRun
	cfg := rollout.NewConfig(t.StatefulSet, t.Namespace, t.Service)
	cfg.TLS = t.TLSFiles
	eng, err := rollout.New(cfg, rollout.Options{RestConfig: rc})
	if err != nil {
		run.Err = err.Error()
		return run
	}
	defer eng.Close()
	stopSampling := sampleMemory(false)
	stopRSS := run.PeakRSS.sample()
	start := time.Now()
	run.Record, err = eng.Snapshot(ctx, rollout.SnapshotOptions{Destination: dir, SpoolDir: filepath.Dir(dir)})
	run.Wall = time.Since(start)
	if err != nil {
		run.Err = err.Error()
	}
	stopRSS()
	run.MaxRSSKB = maxRSSKB()
	run.GoMemory = stopSampling().peak
	return run
}
