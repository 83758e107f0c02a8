package planner

import (
	"sort"
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

// MemberVersion is the version a member runs: its own answer to the Status RPC, else its image tag.
func MemberVersion(m MemberState) (v EtcdVersion, byTag, ok bool) {
	if m.ServerVersion != "" {
		if v, ok := ParseVersion(m.ServerVersion); ok {
			return v, false, true
		}
	}
	v, ok = ImageVersion(m.Image)
	return v, true, ok
}

// versionPath is the version change of rolling roll onto s's template; nil when the template's version is
// unknown, no member's is, or nothing changes.
func versionPath(s ClusterState, roll []int) *VersionPath {
	to, ok := TemplateVersion(s)
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
		v, byTag, ok := MemberVersion(s.Members[i])
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
	sort.Slice(path.From, func(i, j int) bool { return path.From[i].Less(path.From[j]) })
	return path
}

// TemplateVersion is the version the template runs: its image's tag, else the version a member already
// running that image reports by its own word.
func TemplateVersion(st ClusterState) (EtcdVersion, bool) {
	if v, ok := ImageVersion(st.TemplateImage); ok {
		return v, true
	}
	for _, m := range st.Members {
		if m.Image == st.TemplateImage && m.ServerVersion != "" {
			if v, ok := ParseVersion(m.ServerVersion); ok {
				return v, true
			}
		}
	}
	return EtcdVersion{}, false
}
