package planner

import (
	"fmt"
	"slices"
	"strings"
)

// planDowngrade puts etcd's downgrade API in front of a roll that lowers the minor version. etcd refuses to
// start a server older than the cluster version, and only `downgrade enable` lowers that version (and the
// storage version with it); so, unless an earlier run enabled it already, the plan enables it before its
// first disruption. Once it is enabled, the next member restarts only when its storage version has come down
// too: a member still on the newer schema would hand the older binary data it cannot read.
func planDowngrade(s ClusterState, p *Plan) error {
	mv := p.VersionMove
	if mv == nil || mv.To.Major != mv.From.Major || mv.To.Minor >= mv.From.Minor {
		return nil
	}
	first := firstRestart(p.Steps)
	d := &DowngradePlan{Target: mv.To.MajorMinor(), EnableBefore: first}
	p.Downgrade = d
	if cluster, ok := ParseVersion(s.ClusterVersion); ok && cluster.MajorMinor() == d.Target {
		d.Enabled = true
		return checkStorageDowngraded(s, first, d.Target)
	}
	at := 0
	if p.hasLock() {
		at = 1
	}
	p.Steps = slices.Insert(p.Steps, at, Step{Kind: StepEnableDowngrade, Ordinal: first, Version: d.Target})
	return nil
}

// firstRestart is the ordinal of the plan's first restart, -1 when it restarts nobody.
func firstRestart(steps []Step) int {
	for _, st := range steps {
		if st.Kind == StepLowerPartition {
			return st.Ordinal
		}
	}
	return -1
}

// checkStorageDowngraded holds the restart of ordinal while the member reports a storage version newer than
// target (etcd lowers it on every member shortly after the downgrade is enabled). A member that does not
// report one runs a version from before storage versions (3.5), which is as low as it goes.
func checkStorageDowngraded(s ClusterState, ordinal int, target string) error {
	if ordinal < 0 {
		return nil
	}
	m := s.Members[ordinal]
	if v, ok := ParseVersion(m.StorageVersion); ok && v.MajorMinor() != target {
		return Blocked("%s still reports storage version %s: waiting for etcd to lower it to %s after the downgrade was enabled, before it restarts on %s", m.Pod, m.StorageVersion, target, target)
	}
	return nil
}

// line is the downgrade in words, as the preview shows it after the version path:
//
//	downgrade to 3.5: validate ok; enable before etcd-2; cluster version 3.6 → 3.5
//	downgrade to 3.5: enabled; cluster version 3.5
func (d DowngradePlan) line(clusterNow string, name func(int) string) string {
	parts := []string{"downgrade to " + d.Target + ":"}
	if d.Enabled {
		return strings.Join(append(parts, "enabled; cluster version "+d.Target), " ")
	}
	if d.Validated {
		parts = append(parts, "validate ok;")
	}
	enable := "enable first;"
	if d.EnableBefore >= 0 {
		enable = fmt.Sprintf("enable before %s;", name(d.EnableBefore))
	}
	parts = append(parts, enable, fmt.Sprintf("cluster version %s → %s", orUnknown(clusterNow), d.Target))
	return strings.Join(parts, " ")
}

// DowngradeMember is the member the downgrade API is asked through: the leader, which serves enable and cancel
// without forwarding, else the first member that answers.
func DowngradeMember(st ClusterState) (string, error) {
	for _, m := range st.Members {
		if m.IsLeader && m.Reachable {
			return m.Pod, nil
		}
	}
	for _, m := range st.Members {
		if m.Reachable {
			return m.Pod, nil
		}
	}
	return "", fmt.Errorf("%w: no member answers, so etcd's downgrade API cannot be asked", ErrBlocked)
}

// IsMinor says version ("3.5.0") is of minor ("3.5").
func IsMinor(version, minor string) bool {
	v, ok := ParseVersion(version)
	return ok && v.MajorMinor() == minor
}

// DowngradeEnabledFor says a member reports etcd's downgrade enabled for target.
func DowngradeEnabledFor(st ClusterState, target string) bool {
	for _, m := range st.Members {
		if IsMinor(m.DowngradeTarget, target) {
			return true
		}
	}
	return false
}

// DowngradeTargetOf is the downgrade target a member reports ("3.5.0"); "" when none does.
func DowngradeTargetOf(st ClusterState) string {
	for _, m := range st.Members {
		if m.DowngradeTarget != "" {
			return m.DowngradeTarget
		}
	}
	return ""
}

// TemplateMinor is the minor ("3.6") the template runs (templateVersion); "" when that cannot be told.
func TemplateMinor(st ClusterState) string {
	if v, ok := TemplateVersion(st); ok {
		return v.MajorMinor()
	}
	return ""
}
