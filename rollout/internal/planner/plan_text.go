package planner

import (
	"fmt"
	"strings"
)

// String is the one-line summary `pulumi preview` shows, e.g.
//
//	roll etcd-2, etcd-1, etcd-0 to revision etcd-7d9f; move leader etcd-2 → etcd-0 before etcd-2, etcd-0 → etcd-2 before etcd-0; 2 leader transfers
//
// The text depends only on the plan, so the same observation always prints the same line.
func (p Plan) String() string {
	if len(p.Roll) == 0 && len(p.Wait) == 0 {
		if p.hasLock() {
			return "nothing to roll; re-lock the partition"
		}
		if p.UpdateRevision == "" {
			return "nothing to roll"
		}
		return fmt.Sprintf("nothing to roll: every member is at revision %s and healthy", p.UpdateRevision)
	}
	var parts []string
	if p.hasLock() {
		parts = append(parts, "re-lock the partition first")
	}
	for _, st := range p.Steps {
		if st.Kind == StepRecreate {
			parts = append(parts, fmt.Sprintf("bring back %s (down on an older revision) at the current revision first", p.name(st.Ordinal)))
		}
	}
	if len(p.Roll) > 0 {
		parts = append(parts, fmt.Sprintf("roll %s to revision %s", p.names(p.Roll), p.UpdateRevision))
	}
	if len(p.Replace) > 0 {
		parts = append(parts, p.replaceLine())
	}
	if len(p.Wait) > 0 {
		parts = append(parts, fmt.Sprintf("wait for %s (already at %s) to be healthy", p.names(p.Wait), p.UpdateRevision))
	}
	var moves []string
	next := map[int]int{} // index of transfer step -> ordinal rolled right after it
	for n, st := range p.Steps {
		if st.Kind == StepTransferLeader {
			next[n] = -1
			for _, later := range p.Steps[n+1:] {
				if later.Kind == StepLowerPartition {
					next[n] = later.Ordinal
					break
				}
			}
			move := fmt.Sprintf("%s → %s", p.name(st.From), p.name(st.To))
			if next[n] >= 0 {
				move += " before " + p.name(next[n])
			}
			moves = append(moves, move)
		}
	}
	if len(moves) > 0 {
		parts = append(parts, "move leader "+strings.Join(moves, ", "))
	}
	parts = append(parts, Plural(p.Transfers, "leader transfer", "leader transfers"))
	if path, cluster := p.versionParts(); path != "" {
		parts = append(parts, path)
		if v := p.VersionMove; v != nil && v.From.Less(v.To) {
			cluster += " (the point of no return: a member that fails after it is fixed forward, not reverted)"
		}
		if cluster != "" {
			parts = append(parts, cluster)
		}
	} else if v := p.VersionMove; v != nil {
		parts = append(parts, fmt.Sprintf("cluster version %d.%d → %d.%d once %s is rolled (the point of no return: a member that fails after it is fixed forward, not reverted)",
			v.From.Major, v.From.Minor, v.To.Major, v.To.Minor, p.name(v.After)))
	}
	if line := p.SnapshotLine(); line != "" {
		parts = append(parts, line)
	}
	if line := p.WriteOutageLine(); line != "" {
		parts = append(parts, line)
	}
	return strings.Join(parts, "; ")
}

// WriteOutageLine says, for the restart of a one-member etcd's only member, that writes stop; empty otherwise.
func (p Plan) WriteOutageLine() string {
	if p.WriteOutage == nil {
		return ""
	}
	return p.WriteOutage.Pod + " is the only member: every read and write stops while it restarts (quorum 1 of 1; runs only with acceptWriteOutage), and the outage is measured"
}

// SnapshotLine is the snapshot the run takes first, in words; empty when it takes none.
func (p Plan) SnapshotLine() string {
	if p.Snapshot == nil {
		return ""
	}
	line := "a verified snapshot of the leader before " + p.name(p.Snapshot.Before) + " restarts"
	if p.Snapshot.To != "" {
		line += ", to " + p.Snapshot.To
	}
	return line
}

// Detail is the numbered step list the CLI's `plan` command prints under the summary, then each member's
// durability and procedure.
func (p Plan) Detail() string {
	var b strings.Builder
	if line := p.SnapshotLine(); line != "" {
		why := "the only way back once the cluster version moves"
		if p.Snapshot.Required {
			why = "no peer holds the only member's data: required"
		}
		fmt.Fprintf(&b, " 0. %s (%s)\n", line, why)
	}
	if line := p.WriteOutageLine(); line != "" {
		fmt.Fprintf(&b, "    %s\n", line)
	}
	for n, st := range p.Steps {
		fmt.Fprintf(&b, "%2d. %s\n", n+1, p.describe(st))
	}
	for _, m := range p.Members {
		why := ""
		if m.DataWhy != "" {
			why = ": " + m.DataWhy
		}
		fmt.Fprintf(&b, "    %s: %s (data %s%s)\n", m.Pod, m.Procedure, m.Data, why)
	}
	return b.String()
}

// Describe is one step in words, used for progress lines.
func (p Plan) describe(st Step) string {
	switch st.Kind {
	case StepLock:
		return fmt.Sprintf("lock: set partition to %d (replicas) before anything else", st.Ordinal)
	case StepTransferLeader:
		return fmt.Sprintf("move the Raft leader %s → %s", p.name(st.From), p.name(st.To))
	case StepLowerPartition:
		line := fmt.Sprintf("lower partition to %d: the StatefulSet controller recreates %s", st.Ordinal, p.name(st.Ordinal))
		if st.AlreadyDown {
			line += " (already down: costs no quorum; its pod is deleted if the controller does not replace it)"
		}
		if v := p.VersionMove; v != nil && v.After == st.Ordinal {
			line += fmt.Sprintf(" — point of no return: the cluster version moves to %d.%d after it", v.To.Major, v.To.Minor)
		}
		return line
	case StepReplace:
		return fmt.Sprintf("replace %s (its data dies with its pod): remove its member, let its pod go, add it back as a learner, promote it once caught up", p.name(st.Ordinal))
	case StepEnableDowngrade:
		return fmt.Sprintf("etcd downgrade validate and enable %s, then wait until the cluster version and every member's storage version are %s (before %s restarts on %s)", st.Version, st.Version, p.name(st.Ordinal), st.Version)
	case StepRecreate:
		return fmt.Sprintf("bring back %s: delete its pod with the partition locked, so it returns at the current revision (it is down already: costs no quorum)", p.name(st.Ordinal))
	case StepWaitMember:
		return fmt.Sprintf("wait for %s: at %s and Ready, then etcd healthy, voting and caught up", p.name(st.Ordinal), p.UpdateRevision)
	case StepCooldown:
		if p.Cooldown > 0 {
			return fmt.Sprintf("cool down %s", p.Cooldown)
		}
		return "cool down (as configured)"
	case StepRelock:
		return fmt.Sprintf("re-lock: set partition back to %d", st.Ordinal)
	}
	return string(st.Kind)
}

// replaceLine says which members are replaced rather than restarted, and what the window costs: while one is
// removed the cluster has one voter fewer, and tolerates that many fewer failures.
func (p Plan) replaceLine() string {
	return fmt.Sprintf("replace %s instead of restarting (their data dies with the pod: each is removed, added back as a learner and promoted); %s",
		p.names(p.Replace), p.ReplacementCost())
}

// ReplacementCost is what one replacement's window costs the cluster, in words: while the member is removed
// the others are one voter fewer ("while one is out the other 2 voters tolerate no failure").
func (p Plan) ReplacementCost() string {
	voters := len(p.Pods) - 1
	if spare := voters - Quorum(voters); spare > 0 {
		return fmt.Sprintf("while one is out the other %d voters tolerate %s", voters, Plural(spare, "more failure", "more failures"))
	}
	return fmt.Sprintf("while one is out the other %d voters tolerate no failure", voters)
}

func (p Plan) hasLock() bool {
	return len(p.Steps) > 0 && p.Steps[0].Kind == StepLock
}

func (p Plan) name(ordinal int) string {
	if ordinal >= 0 && ordinal < len(p.Pods) && p.Pods[ordinal] != "" {
		return p.Pods[ordinal]
	}
	return fmt.Sprintf("member %d", ordinal)
}

func (p Plan) names(ordinals []int) string {
	out := make([]string, len(ordinals))
	for i, o := range ordinals {
		out[i] = p.name(o)
	}
	return strings.Join(out, ", ")
}

// VersionLine is the version path in one line, as preview shows it next to the plan, e.g.
//
//	etcd 3.5.35 → 3.6.8 (cluster version 3.5 → 3.6 once etcd-0 is rolled)
//	etcd 3.6.7 → 3.6.8 (cluster version stays 3.6)
//
// Empty when the plan changes no version.
func (p Plan) VersionLine() string {
	path, cluster := p.versionParts()
	if cluster == "" {
		return path
	}
	return path + " (" + cluster + ")"
}

// versionParts is the version path ("etcd 3.5.35 → 3.6.8") and what it does to the cluster version
// ("cluster version 3.5 → 3.6 once etcd-0 is rolled"); the second is empty when nothing can be said.
func (p Plan) versionParts() (path, cluster string) {
	v := p.Versions
	if v == nil {
		return "", ""
	}
	from := make([]string, len(v.From))
	for i, f := range v.From {
		from[i] = f.String()
	}
	path = fmt.Sprintf("etcd %s → %s", strings.Join(from, ", "), v.To)
	if len(v.ByTag) > 0 {
		path = fmt.Sprintf("etcd %s (%s: by image tag) → %s", strings.Join(from, ", "), strings.Join(v.ByTag, ", "), v.To)
	}
	now := ""
	if c, ok := ParseVersion(v.Cluster); ok {
		now = c.MajorMinor()
	}
	move := p.VersionMove
	switch {
	case move != nil && move.From.Less(move.To):
		if now == "" {
			// Not read: the cluster version is the lowest minor any member runs, the one the last old member has.
			now = move.From.MajorMinor()
		}
		return path, fmt.Sprintf("cluster version %s → %s once %s is rolled", now, move.To.MajorMinor(), p.name(move.After))
	case move != nil && p.Downgrade != nil:
		return path, p.Downgrade.line(now, p.name)
	case move != nil:
		return path, "a minor downgrade: only etcd's downgrade API lowers the cluster version"
	case now != "":
		return path, "cluster version stays " + now
	}
	return path, ""
}

func orUnknown(s string) string {
	if s == "" {
		return "unknown"
	}
	return s
}
