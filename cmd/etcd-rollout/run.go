package main

import (
	"fmt"
	"time"

	"github.com/spf13/cobra"

	"github.com/etcd-rollout/pulumi-etcd-rollout/rollout"
)

func newRunCommand(o *options) *cobra.Command {
	return &cobra.Command{
		Use:   "run",
		Short: "Roll every member not yet at updateRevision, with live progress and a summary",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			out := cmd.OutOrStdout()
			start := time.Now()
			progress := func(ev rollout.Event) {
				fmt.Fprintf(out, "[%6.1fs] %s\n", ev.Time.Sub(start).Seconds(), ev.Message)
			}
			e, err := o.engine(cmd.Context(), progress)
			if err != nil {
				return err
			}
			defer e.Close()
			res, err := e.Run(cmd.Context())
			fmt.Fprintln(out)
			printSummary(cmd, res, err)
			return err
		},
	}
}

func printSummary(cmd *cobra.Command, res rollout.Result, err error) {
	out := cmd.OutOrStdout()
	outcome := "complete"
	if err != nil {
		outcome = "FAILED"
	}
	fmt.Fprintf(out, "Rollout %s: %s\n", outcome, res.Summary())
	fmt.Fprintf(out, "  members rolled:       %d %v\n", len(res.MembersRolled), res.MembersRolled)
	fmt.Fprintf(out, "  leader transfers:     %d\n", res.LeaderTransfers)
	if res.ElectionsUnknown {
		fmt.Fprintf(out, "  unplanned elections:  unknown (raft term %d → %d: %s)\n", res.TermBefore, res.TermAfter, res.ElectionsUnknownWhy)
	} else {
		fmt.Fprintf(out, "  unplanned elections:  %d (raft term %d → %d)\n", res.UnplannedElections, res.TermBefore, res.TermAfter)
	}
	fmt.Fprintf(out, "  API requests:         %d\n", res.APIRequests)
	if c := res.TrustChecks; c.Checks > 0 {
		fmt.Fprintf(out, "  TLS trust checks:     %d (%d member ports probed, %s, %d API requests)\n", c.Checks, c.Probes,
			c.Duration.Round(time.Millisecond), c.APIRequests)
	}
	if res.ClusterVersion != "" {
		fmt.Fprintf(out, "  cluster version:      %s\n", res.ClusterVersion)
	}
	switch {
	case res.Snapshot != nil:
		fmt.Fprintf(out, "  snapshot:             %s (revision %d, %d bytes, sha256 %s)\n", res.Snapshot.Location, res.Snapshot.Revision, res.Snapshot.Size, res.Snapshot.SHA256)
	case res.SnapshotSkipped != "":
		fmt.Fprintf(out, "  snapshot:             NONE, gone on without one (--proceed-without-snapshot): %s\n", res.SnapshotSkipped)
	}
	if o := res.WriteOutage; o != nil {
		fmt.Fprintf(out, "  write outage:         %s\n", o)
	}
	if f := res.Failure; f != nil {
		fmt.Fprintf(out, "  failed member:        %s on revision %s (%s gate) at %s; %s\n", f.Pod, f.Revision, f.Gate,
			f.At.Format(time.RFC3339), rollout.FailureOutcome(f.RevertedTo, f.RevertError))
	}
	for _, m := range res.Members {
		fmt.Fprintf(out, "  %-20s  down %s\n", m.Pod+":", m.Down.Round(10*time.Millisecond))
	}
	if !res.FinishedAt.IsZero() {
		fmt.Fprintf(out, "  wall time:            %s\n", res.FinishedAt.Sub(res.StartedAt).Round(10*time.Millisecond))
	}
}
