package main

import (
	"fmt"
	"io"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/etcd-rollout/pulumi-etcd-rollout/rollout"
)

func newStatusCommand(o *options) *cobra.Command {
	format := outputText
	cmd := &cobra.Command{
		Use:   "status",
		Short: "Show each member: pod revision and readiness, etcd leader, term and applied index",
		Long: `Show each member: pod revision and readiness, etcd leader, term and applied index, the rollout Lease and
the status the last rollout published. -o json or -o yaml prints the StatefulSet, the members and the Lease as
one document (apiVersion ` + outputAPIVersion + `, kind Status), whose fields are only ever added to.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			e, err := o.engine(cmd.Context(), nil)
			if err != nil {
				return err
			}
			defer e.Close()
			st, err := e.Observe(cmd.Context())
			if err != nil {
				return err
			}
			holder, expiresIn, err := e.LeaseHolder(cmd.Context())
			if err != nil {
				return err
			}
			trusts := e.MemberTrust(cmd.Context(), st)
			if format != outputText {
				return writeDoc(cmd.OutOrStdout(), format, statusDoc{docHead: newDocHead("Status", e.Config(), st),
					Lease: newLeaseDoc(e.Config().StatefulSet, holder, expiresIn), Trust: trusts})
			}
			printStatus(cmd.OutOrStdout(), e.Config(), st)
			printTrust(cmd.OutOrStdout(), trusts)
			fmt.Fprintln(cmd.OutOrStdout())
			switch {
			case holder == "":
				fmt.Fprintf(cmd.OutOrStdout(), "Rollout lease %s: free\n", rollout.LeaseName(e.Config().StatefulSet))
			case expiresIn > 0:
				fmt.Fprintf(cmd.OutOrStdout(), "Rollout lease %s: held by %s (valid %s more without renewal)\n", rollout.LeaseName(e.Config().StatefulSet), holder, expiresIn.Round(time.Second))
			default:
				fmt.Fprintf(cmd.OutOrStdout(), "Rollout lease %s: stale, last held by %s (the next run or `unlock` takes it over)\n", rollout.LeaseName(e.Config().StatefulSet), holder)
			}
			fmt.Fprintln(cmd.OutOrStdout())
			rs, found, err := e.RolloutStatus(cmd.Context())
			if err != nil {
				// The published status is a convenience: without the right to read it, say so and go on.
				fmt.Fprintf(cmd.OutOrStdout(), "Rollout status: unreadable (%v)\n", err)
				return nil
			}
			printRolloutStatus(cmd.OutOrStdout(), e.Config(), rs, found)
			return nil
		},
	}
	cmd.Flags().VarP(&format, "output", "o", "output format: text, json or yaml")
	return cmd
}

func printStatus(out io.Writer, cfg rollout.Config, st rollout.ClusterState) {
	lock := "locked"
	switch {
	case st.Partition < 0:
		lock = "not RollingUpdate"
	case st.Partition < st.Replicas:
		lock = "UNLOCKED: pods at or above this ordinal roll by themselves"
	}
	fmt.Fprintf(out, "StatefulSet %s/%s: %d replicas, partition %d (%s)\n", cfg.Namespace, cfg.StatefulSet, st.Replicas, st.Partition, lock)
	fmt.Fprintf(out, "updateRevision %s, currentRevision %s; etcd: %d voting members, %d learners, cluster version %s\n\n",
		st.UpdateRevision, st.CurrentRevision, st.VotingMembers, st.Learners, orDash(st.ClusterVersion))
	w := tabwriter.NewWriter(out, 0, 0, 2, ' ', 0)
	fmt.Fprintln(w, "MEMBER\tREVISION\tUPDATED\tREADY\tETCD\tVERSION\tSTORAGE\tLEADER\tTERM\tRAFT INDEX\tAPPLIED\tPROBLEM")
	for _, m := range st.Members {
		health := etcdHealth(m)
		leader := ""
		if m.IsLeader {
			leader = "*"
		}
		num := func(v uint64) string {
			if !m.Reachable {
				return "-"
			}
			return strconv.FormatUint(v, 10)
		}
		// The member's own word; for one that does not answer, its image tag, marked as such.
		version := m.ServerVersion
		if version == "" {
			if v, ok := rollout.ImageVersion(m.Image); ok {
				version = v.String() + " (tag)"
			}
		}
		fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", m.Pod, orDash(m.Revision), yesNo(m.Revision == st.UpdateRevision),
			yesNo(m.Ready), health, orDash(version), orDash(m.StorageVersion), leader, num(m.RaftTerm), num(m.RaftIndex), num(m.AppliedIndex), m.Problem)
	}
	w.Flush()
}

// printRolloutStatus prints the status the last rollout published on its ConfigMap: what `kubectl wait`
// and dashboards see.
func printRolloutStatus(out io.Writer, cfg rollout.Config, st rollout.RolloutStatus, found bool) {
	name := rollout.StatusConfigMapName(cfg.StatefulSet)
	if !found {
		fmt.Fprintf(out, "Rollout status (configmap %s): none published yet (no rollout has run)\n", name)
		return
	}
	fmt.Fprintf(out, "Rollout status (configmap %s, updated %s by %s):\n", name, orDash(formatTime(st.UpdatedAt)), orDash(st.Run))
	members := "-"
	if st.Members >= 0 && st.MembersDone >= 0 {
		members = fmt.Sprintf("%d of %d", st.MembersDone, st.Members)
	}
	fmt.Fprintf(out, "target revision %s; members done %s", orDash(st.TargetRevision), members)
	if len(st.PendingMembers) > 0 {
		fmt.Fprintf(out, " (pending: %s)", strings.Join(st.PendingMembers, ", "))
	}
	fmt.Fprintf(out, "; step %s\n", orDash(st.Step))
	if st.Message != "" {
		fmt.Fprintf(out, "last progress: %s\n", st.Message)
	}
	if st.Snapshot != "" {
		fmt.Fprintf(out, "last snapshot before a point of no return: %s\n", st.Snapshot)
	}
	if st.WriteOutage != "" {
		fmt.Fprintf(out, "last one-member restart: %s\n", st.WriteOutage)
	}
	fmt.Fprintln(out)
	w := tabwriter.NewWriter(out, 0, 0, 2, ' ', 0)
	fmt.Fprintln(w, "CONDITION\tSTATUS\tREASON\tSINCE\tMESSAGE")
	for _, c := range st.Conditions {
		fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%s\n", c.Type, c.Status, c.Reason, orDash(formatTime(c.LastTransitionTime.Time)), oneLine(c.Message))
	}
	w.Flush()
}

func formatTime(t time.Time) string {
	if t.IsZero() {
		return ""
	}
	return t.UTC().Format(time.RFC3339)
}

// oneLine keeps a table row on one line: an error message may hold newlines.
func oneLine(s string) string { return strings.Join(strings.Fields(s), " ") }

func yesNo(b bool) string {
	if b {
		return "yes"
	}
	return "no"
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// printTrust prints the CAs each member's etcd process trusts, as its listeners announce them: what the
// process loaded when it started, which a Secret changed since does not show until the member restarts.
func printTrust(out io.Writer, trusts []rollout.MemberTrust) {
	if len(trusts) == 0 {
		return
	}
	fmt.Fprintln(out, "\nTrust each member's etcd process started with (the CAs its TLS listeners announce, by name):")
	for _, mt := range trusts {
		for _, side := range []struct {
			name string
			lt   *rollout.ListenerTrust
		}{{"peer", mt.Peer}, {"client", mt.Client}} {
			if side.lt != nil {
				fmt.Fprintf(out, "  %s %s: %s\n", mt.Pod, side.name, describeListenerTrust(side.lt))
			}
		}
	}
}

func describeListenerTrust(lt *rollout.ListenerTrust) string {
	if lt.Err != "" && lt.ServedIssuer == "" {
		return "not seen: " + lt.Err
	}
	var cas []string
	for _, ca := range lt.CAs {
		// Matched by name: the handshake names a CA, never its key, so a trust file holding CAs of one name
		// gives each of them.
		fp := "no CA of this name in " + orDash(lt.TrustFile) + " now"
		if len(ca.SHA256) > 0 {
			short := make([]string, 0, len(ca.SHA256))
			for _, h := range ca.SHA256 {
				short = append(short, h[:16])
			}
			fp = "CA of this name in " + lt.TrustFile + ": sha256 " + strings.Join(short, " or ")
		}
		cas = append(cas, fmt.Sprintf("%s (%s)", ca.Subject, fp))
	}
	trusts := "asks no client certificate"
	if lt.AsksClientCert {
		trusts = "trusts " + strings.Join(cas, ", ")
	}
	line := fmt.Sprintf("%s; serves a certificate of %s until %s", trusts, lt.ServedIssuer, lt.ServedNotAfter.UTC().Format("2006-01-02"))
	if lt.Err != "" {
		line += "; " + lt.Err
	}
	return line
}
