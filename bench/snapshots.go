package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/etcd-rollout/pulumi-etcd-rollout/bench/engineroll"
)

// measureSnapshots times a snapshot of the first cluster's keyspace two ways (issue 34) and adds them to the
// scenario's setup facts: through the engine (the port-forward to the leader, then its check and store, as a
// run takes one before a point of no return), in a bench-engine process of its own so its peak RSS is the
// engine's; and directly, an etcd client on the member's own port streaming to a file. Both files go to a
// scratch directory next to the binaries, removed afterwards (a heavy keyspace's snapshot is some 270 MB).
func (b *bed) measureSnapshots(ctx context.Context, kubeconfig string) error {
	self, err := os.Executable()
	if err != nil {
		return err
	}
	dir, err := os.MkdirTemp(filepath.Dir(self), "snapshots-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	spec, err := json.Marshal([]Target{targetOf(b.clusters[0])})
	if err != nil {
		return err
	}
	cmd := exec.CommandContext(ctx, filepath.Join(filepath.Dir(self), engineBinary), "-kubeconfig", kubeconfig,
		"-targets", string(spec), "-snapshot-only", "-snapshot-to", filepath.Join(dir, "engine"))
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("the engine's snapshot (child): %w: %s", err, strings.TrimSpace(stderr.String()))
	}
	var run engineroll.SnapshotRun
	if err := json.Unmarshal(stdout.Bytes(), &run); err != nil {
		return fmt.Errorf("decoding the child's snapshot: %w", err)
	}
	if run.Err != "" {
		return fmt.Errorf("the engine's snapshot: %s", run.Err)
	}
	r := run.Record
	b.Facts["snapshot through the port-forward"] = fmt.Sprintf("%.0f MB, transfer %.1f s = %.0f MB/s; with its check, store and read-back %.1f s; engine peak RSS %.0f MB: anonymous at most %.0f MB (Go heap in use at most %.0f MB), file-backed at most %.0f MB (the file bbolt's check maps: the kernel can drop those pages)",
		float64(r.Size)/1e6, r.Seconds, r.MBPerSecond, run.Wall.Seconds(), float64(run.MaxRSSKB)/1024, float64(run.PeakRSS.AnonKB)/1024,
		float64(run.GoMemory.HeapInuse)/1024, float64(run.PeakRSS.FileKB)/1024)
	size, took, err := snapshotDirect(ctx, b.clients[0], filepath.Join(dir, "direct.db"))
	if err != nil {
		return err
	}
	b.Facts["snapshot direct"] = fmt.Sprintf("%.0f MB in %.1f s = %.0f MB/s (an etcd client on the member's own port, to a file, no check)",
		float64(size)/1e6, took.Seconds(), float64(size)/1e6/took.Seconds())
	return nil
}

// snapshotDirect streams a snapshot from cli to file and says how big it was and how long it took.
func snapshotDirect(ctx context.Context, cli *clientv3.Client, file string) (int64, time.Duration, error) {
	f, err := os.OpenFile(file, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o600)
	if err != nil {
		return 0, 0, err
	}
	defer f.Close()
	start := time.Now()
	rc, err := cli.Snapshot(ctx)
	if err != nil {
		return 0, 0, fmt.Errorf("direct snapshot: %w", err)
	}
	defer rc.Close()
	n, err := io.Copy(f, rc)
	if err != nil {
		return n, 0, fmt.Errorf("direct snapshot: %w", err)
	}
	return n, time.Since(start), nil
}
