package provider

import (
	"fmt"

	"github.com/etcd-rollout/pulumi-etcd-rollout/rollout"
)

// planLines renders a plan as the list `pulumi preview --diff` prints, one line per step that a person cares
// about: the members that restart (or are replaced), in order, and every leader move. Waits and cool-downs that belong to a
// restart are implied by it and left out, so the list stays as long as the roll is. When the roll changes
// etcd's version (minor or patch), the first line says from what to what, by the members' own word, and
// when the cluster version moves.
func planLines(plan rollout.Plan) []string {
	name := func(ordinal int) string {
		if ordinal >= 0 && ordinal < len(plan.Pods) && plan.Pods[ordinal] != "" {
			return plan.Pods[ordinal]
		}
		return fmt.Sprintf("member %d", ordinal)
	}
	rolled := map[int]bool{}
	for _, o := range plan.Roll {
		rolled[o] = true
	}
	var lines []string
	// The version path comes first: it is what the roll is for, and it says when the cluster version moves.
	if line := plan.VersionLine(); line != "" {
		lines = append(lines, line)
	}
	if line := plan.SnapshotLine(); line != "" {
		lines = append(lines, line)
	}
	for _, st := range plan.Steps {
		switch st.Kind {
		case rollout.StepLock:
			lines = append(lines, fmt.Sprintf("lock partition at %d", st.Ordinal))
		case rollout.StepEnableDowngrade:
			lines = append(lines, fmt.Sprintf("enable etcd's downgrade to %s, then wait for cluster version %s", st.Version, st.Version))
		case rollout.StepTransferLeader:
			lines = append(lines, fmt.Sprintf("move leader %s -> %s", name(st.From), name(st.To)))
		case rollout.StepLowerPartition:
			line := fmt.Sprintf("roll %s", name(st.Ordinal))
			if plan.WriteOutage != nil {
				line += ": the only member, so every read and write stops until it is back (acceptWriteOutage); the outage is measured"
			}
			lines = append(lines, line)
		case rollout.StepReplace:
			lines = append(lines, fmt.Sprintf("replace %s: its data dies with its pod, so it is removed, added back as a learner and promoted, never restarted under its old member ID (%s)",
				name(st.Ordinal), plan.ReplacementCost()))
		case rollout.StepWaitMember:
			if !rolled[st.Ordinal] {
				lines = append(lines, fmt.Sprintf("wait for %s to be healthy", name(st.Ordinal)))
			}
		case rollout.StepRelock:
			lines = append(lines, fmt.Sprintf("re-lock partition at %d", st.Ordinal))
		}
	}
	return lines
}

// needsRun reports whether `pulumi up` has to run the engine for this plan. Any step counts: a plan that only
// locks (every member updated, the partition left lowered by a run that was killed) is what the next run
// finishes, taking the dead run's lease over on the way; dropping it would leave the partition lowered and
// the lease held.
func needsRun(plan rollout.Plan) bool { return len(plan.Steps) > 0 }

// takeoverLine is the preview line for a partition that a run holding the rollout Lease left lowered (it was
// killed, or lost the API server): the next run watches that lease until it has gone unrenewed for its whole
// duration, takes it over, and re-locks the partition before anything else (a holder that still renews it
// refuses the next run instead). "" when the partition is locked or nobody is known to hold the lease.
func takeoverLine(s rollout.ClusterState, lease leaseFacts) string {
	if lease.Holder == "" || s.Partition < 0 || s.Partition >= s.Replicas {
		return ""
	}
	wait := ""
	if lease.Duration > 0 {
		wait = " for " + lease.Duration.String()
	}
	return fmt.Sprintf("take over lease %s from %q once it has gone unrenewed%s (its run stopped with the partition at %d)",
		lease.Name, lease.Holder, wait, s.Partition)
}

// withTakeover puts the takeover line, if any, before the plan's own lines: it is what the run does first.
func withTakeover(lines []string, s rollout.ClusterState, lease leaseFacts) []string {
	if line := takeoverLine(s, lease); line != "" {
		return append([]string{line}, lines...)
	}
	return lines
}
