package rollout

import (
	"fmt"
	"sort"
	"strings"
)

// VersionPath is the etcd version change a plan makes: what the members it restarts run now, by their own
// word where they answer, and what the template will run.
type VersionPath struct {
	// From lists the distinct versions the members to roll run now, oldest first.
	From []EtcdVersion
	// ByTag names the members whose version is read from their image tag because they did not answer the
	// Status RPC (down, or not etcd yet): a hint, not etcd's word.
	ByTag []string
	// To is the template image's version: the members are not running it yet, so the tag is all there is.
	To EtcdVersion
	// Cluster is the cluster version now ("3.5.0"), as a healthy member reports it; empty when unknown.
	Cluster string
	// DowngradeTarget is the version etcd's downgrade API is enabled for, as a member reports it; empty
	// when none is.
	DowngradeTarget string
}

// memberVersion is the version a member runs: its own answer to the Status RPC, else its image tag.
func memberVersion(m MemberState) (v EtcdVersion, byTag, ok bool) {
	if m.ServerVersion != "" {
		if v, ok := ParseVersion(m.ServerVersion); ok {
			return v, false, true
		}
	}
	v, ok = ImageVersion(m.Image)
	return v, true, ok
}

// ParseVersion reads "3.6.8" (or "v3.6.8", "3.6.0-rc.1") as etcd reports it.
func ParseVersion(s string) (EtcdVersion, bool) {
	return ImageVersion(":" + strings.TrimSpace(s))
}

// versionPath is the version change of rolling roll onto s's template; nil when the template's version is
// unknown, no member's is, or nothing changes.
func versionPath(s ClusterState, roll []int) *VersionPath {
	to, ok := ImageVersion(s.TemplateImage)
	if !ok {
		return nil
	}
	path := &VersionPath{To: to, Cluster: s.ClusterVersion}
	for _, m := range s.Members {
		if m.DowngradeTarget != "" && (path.DowngradeTarget == "" || m.IsLeader) {
			path.DowngradeTarget = m.DowngradeTarget
		}
	}
	seen := map[EtcdVersion]bool{}
	changes := false
	for _, i := range roll {
		v, byTag, ok := memberVersion(s.Members[i])
		if !ok {
			continue
		}
		if byTag {
			path.ByTag = append(path.ByTag, s.Members[i].Pod)
		}
		if !seen[v] {
			seen[v] = true
			path.From = append(path.From, v)
		}
		changes = changes || v != to
	}
	if !changes {
		return nil
	}
	sort.Slice(path.From, func(i, j int) bool { return path.From[i].less(path.From[j]) })
	return path
}

func (v EtcdVersion) less(w EtcdVersion) bool {
	if v.Major != w.Major {
		return v.Major < w.Major
	}
	if v.Minor != w.Minor {
		return v.Minor < w.Minor
	}
	return v.Patch < w.Patch
}

// minor is "3.6" of 3.6.8.
func (v EtcdVersion) minor() string { return fmt.Sprintf("%d.%d", v.Major, v.Minor) }

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
		now = c.minor()
	}
	move := p.VersionMove
	switch {
	case move != nil && move.From.less(move.To):
		if now == "" {
			// Not read: the cluster version is the lowest minor any member runs, the one the last old member has.
			now = move.From.minor()
		}
		return path, fmt.Sprintf("cluster version %s → %s once %s is rolled", now, move.To.minor(), p.name(move.After))
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
