// Package durability says whether an etcd member's data outlives its pod, from the StatefulSet's pod template:
// where etcd keeps its data and its WAL, and what kind of volume holds each. The engine needs it before it
// touches a member: deleting the pod of a member whose data dies with it is a replacement, not a restart, and
// restarting it under its old identity with an empty log breaks Raft's durability (issue 32; the facts are in
// ../shared/notes/shapes.md §1).
//
// It reads the template's own words only: a value it cannot resolve (a shell variable, a `$(VAR)`, a config
// file whose content is elsewhere, a relative path against an unknown working directory) is Unknown, never a
// guess either way.
package durability

import (
	"fmt"
	"path"
	"strings"

	corev1 "k8s.io/api/core/v1"

	"github.com/etcd-rollout/pulumi-etcd-rollout/rollout/internal/podpath"
)

// Kind is how long a directory's content lives.
type Kind string

const (
	// Unknown: the template does not say where the directory is, or on what.
	Unknown Kind = "Unknown"
	// SurvivesPod: on a PersistentVolumeClaim (a volumeClaimTemplate or a claim named in the pod).
	SurvivesPod Kind = "SurvivesPod"
	// SameNodeOnly: on a hostPath of a pod pinned to one node (nodeName, a kubernetes.io/hostname
	// nodeSelector, or a required node affinity to one node): the pod comes back on that node, and finds it.
	SameNodeOnly Kind = "SameNodeOnly"
	// AnyNode: on a hostPath of a pod the scheduler may place on any of several nodes. Neither a restart nor
	// a replacement is safe: a pod recreated elsewhere finds no data (an empty log under a voting identity),
	// and one recreated on the same node finds the old member's data (a removed member's, after a
	// replacement). The engine refuses to roll it.
	AnyNode Kind = "AnyNode"
	// DiesWithPod: on an emptyDir (any medium), a generic ephemeral volume or an inline CSI volume: the kubelet
	// keeps it across container restarts and deletes it with the pod.
	DiesWithPod Kind = "DiesWithPod"
	// DiesWithContainer: on no volume, in the container's writable layer.
	DiesWithContainer Kind = "DiesWithContainer"
)

// Lost says a pod delete loses what the directory holds.
func (k Kind) Lost() bool { return k == DiesWithPod || k == DiesWithContainer }

// Dir is one directory etcd writes, classified.
type Dir struct {
	// Role is "data dir" or "WAL dir".
	Role string
	// Path is where etcd keeps it inside the container ("" when unknown).
	Path string
	// Volume is the volume it is on ("" when none or unknown).
	Volume string
	Kind   Kind
	// Why says, for a person, how Kind was found.
	Why string
}

// Template is what the classification reads: the pod template's spec, its etcd container, the names of the
// StatefulSet's volumeClaimTemplates, and the values etcd gets for its flags (flag name → value, with ETCD_*
// variables folded in, as rollout.EtcdFlagValues reads them). When etcd is given a configuration file, its
// settings (read by the configfile package) are Config, or why they could not be read ConfigProblem.
type Template struct {
	Spec          *corev1.PodSpec
	Container     *corev1.Container
	Claims        []string
	FlagValues    map[string]string
	Config        *ConfigFile
	ConfigProblem string
}

// ConfigFile is what etcd's configuration file says of where it keeps its data; "" is unset.
type ConfigFile struct {
	Name, DataDir, WALDir string
}

// Of classifies the data dir and, when etcd is given one, the WAL dir. With a configuration file, etcd reads
// both (and the member name of the default data dir) from the file alone: "other command line flags and
// environment variables will be ignored".
func Of(t Template) []Dir {
	settings, from := ConfigFile{Name: t.FlagValues["name"], DataDir: t.FlagValues["data-dir"], WALDir: t.FlagValues["wal-dir"]}, ""
	if file := t.FlagValues["config-file"]; file != "" {
		if t.Config == nil {
			why := fmt.Sprintf("etcd reads its settings from %s, whose data-dir and wal-dir win over the flags", file)
			if t.ConfigProblem != "" {
				why += ", and which could not be read: " + t.ConfigProblem
			}
			return []Dir{{Role: "data dir", Kind: Unknown, Why: why}}
		}
		settings, from = *t.Config, " (from "+file+")"
	}
	dataDir := settings.DataDir
	if dataDir == "" {
		name := settings.Name
		if name == "" {
			name = "default"
		}
		dataDir = name + ".etcd" // etcd's default, relative to its working directory
	}
	dirs := []Dir{t.classify("data dir", dataDir)}
	if settings.WALDir != "" {
		dirs = append(dirs, t.classify("WAL dir", settings.WALDir))
	}
	for i := range dirs {
		dirs[i].Why += from
	}
	return dirs
}

// classify finds the volume p is on and what kind of volume that is.
func (t Template) classify(role, p string) Dir {
	d := Dir{Role: role, Path: p}
	switch {
	case strings.ContainsAny(p, "$`"):
		d.Kind, d.Why = Unknown, fmt.Sprintf("the %s %q is expanded when the container starts", role, p)
		return d
	case !path.IsAbs(p):
		if t.Container == nil || t.Container.WorkingDir == "" {
			d.Kind, d.Why = Unknown, fmt.Sprintf("the %s %q is relative to the image's working directory, which the template does not name", role, p)
			return d
		}
		p = path.Join(t.Container.WorkingDir, p)
		d.Path = p
	}
	mount, ok := podpath.MountOf(t.Container, p)
	if !ok {
		d.Kind, d.Why = DiesWithContainer, fmt.Sprintf("the %s %s is on no volume mounted in container %s", role, p, t.containerName())
		return d
	}
	d.Volume = mount.Name
	d.Kind, d.Why = t.volumeKind(mount)
	d.Why = fmt.Sprintf("the %s %s is on %s mounted at %s", role, p, d.Why, mount.MountPath)
	return d
}

// volumeKind says what kind of volume mount m is on, and names it for a person.
func (t Template) volumeKind(m corev1.VolumeMount) (Kind, string) {
	for _, c := range t.Claims {
		if c == m.Name {
			return SurvivesPod, fmt.Sprintf("volumeClaimTemplate %q", c)
		}
	}
	if t.Spec == nil {
		return Unknown, fmt.Sprintf("volume %q, which the template does not define", m.Name)
	}
	for _, v := range t.Spec.Volumes {
		if v.Name != m.Name {
			continue
		}
		switch {
		case v.PersistentVolumeClaim != nil:
			return SurvivesPod, fmt.Sprintf("PersistentVolumeClaim %q (volume %q)", v.PersistentVolumeClaim.ClaimName, v.Name)
		case v.EmptyDir != nil && v.EmptyDir.Medium == corev1.StorageMediumMemory:
			return DiesWithPod, fmt.Sprintf("emptyDir volume %q in memory (tmpfs)", v.Name)
		case v.EmptyDir != nil:
			return DiesWithPod, fmt.Sprintf("emptyDir volume %q", v.Name)
		case v.Ephemeral != nil:
			return DiesWithPod, fmt.Sprintf("generic ephemeral volume %q", v.Name)
		case v.CSI != nil:
			return DiesWithPod, fmt.Sprintf("inline CSI volume %q", v.Name)
		case v.HostPath != nil && pinnedToOneNode(t.Spec):
			return SameNodeOnly, fmt.Sprintf("hostPath volume %q (%s) of a pod pinned to one node", v.Name, v.HostPath.Path)
		case v.HostPath != nil:
			return AnyNode, fmt.Sprintf("hostPath volume %q (%s) of a pod not pinned to one node", v.Name, v.HostPath.Path)
		}
		return Unknown, fmt.Sprintf("volume %q, of a kind not judged here", v.Name)
	}
	return Unknown, fmt.Sprintf("volume %q, which the template does not define", m.Name)
}

// pinnedToOneNode says the scheduler can place the pod on one node only: the spec names it, selects it by
// its kubernetes.io/hostname label, or requires a node affinity every term of which names one node.
func pinnedToOneNode(spec *corev1.PodSpec) bool {
	if spec.NodeName != "" || spec.NodeSelector[corev1.LabelHostname] != "" {
		return true
	}
	if spec.Affinity == nil || spec.Affinity.NodeAffinity == nil || spec.Affinity.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution == nil {
		return false
	}
	terms := spec.Affinity.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution.NodeSelectorTerms
	nodes := map[string]bool{}
	for _, term := range terms {
		named := ""
		for _, r := range append(append([]corev1.NodeSelectorRequirement{}, term.MatchExpressions...), term.MatchFields...) {
			if (r.Key == corev1.LabelHostname || r.Key == "metadata.name") && r.Operator == corev1.NodeSelectorOpIn && len(r.Values) == 1 {
				named = r.Values[0]
			}
		}
		if named == "" {
			return false // this term lets the pod onto nodes it does not name
		}
		nodes[named] = true
	}
	return len(nodes) == 1
}

func (t Template) containerName() string {
	if t.Container == nil {
		return "etcd"
	}
	return t.Container.Name
}
