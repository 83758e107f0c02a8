package provider

import (
	"fmt"

	"github.com/etcd-rollout/pulumi-etcd-rollout/rollout"
)

// planLines renders a plan as the list `pulumi preview --diff` prints, one line per step that a person cares
// about: the members that restart, in order, and every leader move. Waits and cool-downs that belong to a
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
	for _, st := range plan.Steps {
		switch st.Kind {
		case rollout.StepLock:
			lines = append(lines, fmt.Sprintf("lock partition at %d", st.Ordinal))
		case rollout.StepEnableDowngrade:
			lines = append(lines, fmt.Sprintf("enable etcd's downgrade to %s, then wait for cluster version %s", st.Version, st.Version))
		case rollout.StepTransferLeader:
			lines = append(lines, fmt.Sprintf("move leader %s -> %s", name(st.From), name(st.To)))
		case rollout.StepLowerPartition:
			lines = append(lines, fmt.Sprintf("roll %s", name(st.Ordinal)))
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

// hasWork reports whether a plan restarts or waits for any member; a plan that only locks is not a rollout.
func hasWork(plan rollout.Plan) bool { return len(plan.Roll) > 0 || len(plan.Wait) > 0 }
