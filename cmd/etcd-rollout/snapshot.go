package main

import (
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/spf13/cobra"

	"github.com/etcd-rollout/pulumi-etcd-rollout/rollout"
)

// snapshotDoc is `snapshot -o json|yaml`: the stored snapshot's record, as it is kept next to it.
type snapshotDoc struct {
	APIVersion string                 `json:"apiVersion"`
	Kind       string                 `json:"kind"` // "Snapshot"
	Snapshot   rollout.SnapshotRecord `json:"snapshot"`
}

func newSnapshotCommand(o *options) *cobra.Command {
	format := outputText
	var to, spool string
	cmd := &cobra.Command{
		Use:   "snapshot --to <directory or URL>",
		Short: "Take a verified snapshot of the cluster from its leader and store it",
		Long: `snapshot streams a snapshot from the etcd leader (through the same port-forward as every other call), checks
it (etcd's sha256, bbolt's consistency check, its revision against the one read just before), stores it with a
<name>.json record next to it, and reads the stored copy back to compare. It disrupts nothing.

--to is a directory (a path or file:///path: files 0600 in 0700 directories) or an object store: s3://bucket,
gs://bucket, azblob://container, with gocloud.dev's URL options (region, endpoint, prefix, ssetype...). The
store's credentials come from its usual sources (environment, workload identity, its config files); a URL that
carries one is refused, since it is printed and recorded. A snapshot holds every key, Secrets included: keep it
where the cluster's Secrets may be kept.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if to == "" {
				return usageError{errors.New("--to is required: a directory or a file://, s3://, gs:// or azblob:// URL")}
			}
			log := cmd.OutOrStdout()
			if format != outputText {
				log = cmd.ErrOrStderr()
			}
			start := time.Now()
			e, err := o.engine(cmd.Context(), func(ev rollout.Event) {
				fmt.Fprintf(log, "[%6.1fs] %s\n", ev.Time.Sub(start).Seconds(), ev.Message)
			})
			if err != nil {
				return err
			}
			defer e.Close()
			rec, err := e.Snapshot(cmd.Context(), rollout.SnapshotOptions{Destination: to, SpoolDir: spool})
			if errors.Is(err, rollout.ErrBadSnapshotDestination) {
				return usageError{err}
			}
			if err != nil {
				return err
			}
			if format != outputText {
				return writeDoc(cmd.OutOrStdout(), format, snapshotDoc{APIVersion: outputAPIVersion, Kind: "Snapshot", Snapshot: rec})
			}
			printSnapshot(cmd.OutOrStdout(), rec)
			return nil
		},
	}
	cmd.Flags().StringVar(&to, "to", "", "where to store it: a directory, or a file://, s3://, gs:// or azblob:// URL")
	cmd.Flags().StringVar(&spool, "spool-dir", "", "where it is verified before it is stored (default: the system's temporary directory)")
	cmd.Flags().VarP(&format, "output", "o", "output format: text, json or yaml")
	return cmd
}

func printSnapshot(out io.Writer, rec rollout.SnapshotRecord) {
	fmt.Fprintf(out, "\nSnapshot %s\n", rec.Location)
	fmt.Fprintf(out, "  from %s (etcd %s), revision %d (%d read just before), storage version %s\n",
		rec.Member, orDash(rec.EtcdVersion), rec.Revision, rec.RevisionBefore, orDash(rec.StorageVersion))
	fmt.Fprintf(out, "  %d bytes in %.1f s (%.1f MB/s), sha256 %s\n", rec.Size, rec.Seconds, rec.MBPerSecond, rec.SHA256)
	fmt.Fprintf(out, "  record: %s.json; restore with `etcdutl snapshot restore` (docs/usage.md)\n", rec.Location)
}
