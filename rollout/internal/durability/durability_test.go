package durability

import (
	"testing"

	"github.com/stretchr/testify/assert"
	corev1 "k8s.io/api/core/v1"
)

func TestOf(t *testing.T) {
	volumes := []corev1.Volume{
		{Name: "scratch", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}},
		{Name: "ram", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{Medium: corev1.StorageMediumMemory}}},
		{Name: "eph", VolumeSource: corev1.VolumeSource{Ephemeral: &corev1.EphemeralVolumeSource{}}},
		{Name: "claimed", VolumeSource: corev1.VolumeSource{PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: "etcd-shared"}}},
		{Name: "node", VolumeSource: corev1.VolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: "/srv/etcd"}}},
		{Name: "tls", VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{SecretName: "etcd-tls"}}},
	}
	container := func(workingDir string, mounts ...corev1.VolumeMount) *corev1.Container {
		return &corev1.Container{Name: "etcd", WorkingDir: workingDir, VolumeMounts: mounts}
	}
	mount := func(name, at string) corev1.VolumeMount { return corev1.VolumeMount{Name: name, MountPath: at} }
	tests := []struct {
		name      string
		container *corev1.Container
		claims    []string
		flags     map[string]string
		config    *ConfigFile
		want      []Kind
		wantWhy   string
	}{
		{"a volumeClaimTemplate", container("", mount("data", "/var/lib/etcd")), []string{"data"},
			map[string]string{"data-dir": "/var/lib/etcd/data"}, nil, []Kind{SurvivesPod}, `volumeClaimTemplate "data" mounted at /var/lib/etcd`},
		{"a claim named in the pod", container("", mount("claimed", "/var/lib/etcd")), nil,
			map[string]string{"data-dir": "/var/lib/etcd"}, nil, []Kind{SurvivesPod}, `PersistentVolumeClaim "etcd-shared"`},
		{"an emptyDir", container("", mount("scratch", "/var/lib/etcd")), nil,
			map[string]string{"data-dir": "/var/lib/etcd/data"}, nil, []Kind{DiesWithPod}, `emptyDir volume "scratch"`},
		{"an emptyDir in memory", container("", mount("ram", "/data")), nil,
			map[string]string{"data-dir": "/data"}, nil, []Kind{DiesWithPod}, "in memory (tmpfs)"},
		{"a generic ephemeral volume", container("", mount("eph", "/data")), nil,
			map[string]string{"data-dir": "/data/etcd"}, nil, []Kind{DiesWithPod}, "generic ephemeral volume"},
		{"a hostPath of a pod on any node", container("", mount("node", "/data")), nil,
			map[string]string{"data-dir": "/data"}, nil, []Kind{AnyNode}, "hostPath volume \"node\" (/srv/etcd) of a pod not pinned to one node"},
		{"no volume", container("", mount("tls", "/etc/etcd/pki")), nil,
			map[string]string{"data-dir": "/var/lib/etcd"}, nil, []Kind{DiesWithContainer}, "is on no volume mounted in container etcd"},
		{"the longest mount wins", container("", mount("data", "/var/lib"), mount("scratch", "/var/lib/etcd")), []string{"data"},
			map[string]string{"data-dir": "/var/lib/etcd/member"}, nil, []Kind{DiesWithPod}, "mounted at /var/lib/etcd"},
		{"a mount path that only shares a prefix", container("", mount("scratch", "/var/lib/etc")), nil,
			map[string]string{"data-dir": "/var/lib/etcd"}, nil, []Kind{DiesWithContainer}, "on no volume"},
		{"a WAL dir of another kind", container("", mount("data", "/var/lib/etcd"), mount("ram", "/wal")), []string{"data"},
			map[string]string{"data-dir": "/var/lib/etcd", "wal-dir": "/wal/member"}, nil, []Kind{SurvivesPod, DiesWithPod}, ""},
		{"the default data dir under a known working directory", container("/var/lib/etcd", mount("scratch", "/var/lib/etcd")), nil,
			map[string]string{"name": "etcd-0"}, nil, []Kind{DiesWithPod}, "/var/lib/etcd/etcd-0.etcd"},
		{"the default data dir under the image's working directory", container("", mount("scratch", "/var/lib/etcd")), nil,
			map[string]string{}, nil, []Kind{Unknown}, `"default.etcd" is relative to the image's working directory`},
		{"a data dir a shell expands", container("", mount("scratch", "/var/lib/etcd")), nil,
			map[string]string{"data-dir": "$DATA_DIR"}, nil, []Kind{Unknown}, "expanded when the container starts"},
		{"a config file", container("", mount("scratch", "/var/lib/etcd")), nil,
			map[string]string{"config-file": "/etc/etcd/etcd.yaml", "data-dir": "/var/lib/etcd"}, nil, []Kind{Unknown}, "reads its settings from /etc/etcd/etcd.yaml"},
		{"a config file that could not be read", container("", mount("scratch", "/var/lib/etcd")), nil,
			map[string]string{"config-file": "/etc/etcd/etcd.yaml"}, nil, []Kind{Unknown}, "whose data-dir and wal-dir win over the flags"},
		{"a config file's data dir wins over the flags", container("", mount("data", "/var/lib/etcd"), mount("scratch", "/scratch")), []string{"data"},
			map[string]string{"config-file": "/etc/etcd/etcd.yaml", "data-dir": "/var/lib/etcd"}, &ConfigFile{DataDir: "/scratch/etcd"},
			[]Kind{DiesWithPod}, `emptyDir volume "scratch" mounted at /scratch (from /etc/etcd/etcd.yaml)`},
		{"a config file's WAL dir", container("", mount("data", "/var/lib/etcd"), mount("ram", "/wal")), []string{"data"},
			map[string]string{"config-file": "/etc/etcd/etcd.yaml", "wal-dir": "/var/lib/etcd/wal"}, &ConfigFile{DataDir: "/var/lib/etcd", WALDir: "/wal"},
			[]Kind{SurvivesPod, DiesWithPod}, "(from /etc/etcd/etcd.yaml)"},
		{"a config file without a data dir: its name's default, not the flag's", container("/var/lib/etcd", mount("scratch", "/var/lib/etcd")), nil,
			map[string]string{"config-file": "/etc/etcd/etcd.yaml", "name": "flag-name"}, &ConfigFile{Name: "etcd-1"},
			[]Kind{DiesWithPod}, "/var/lib/etcd/etcd-1.etcd"},
		{"a volume the template does not define", container("", mount("gone", "/var/lib/etcd")), nil,
			map[string]string{"data-dir": "/var/lib/etcd"}, nil, []Kind{Unknown}, "does not define"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dirs := Of(Template{Spec: &corev1.PodSpec{Volumes: volumes}, Container: tt.container, Claims: tt.claims, FlagValues: tt.flags, Config: tt.config})
			var kinds []Kind
			for _, d := range dirs {
				kinds = append(kinds, d.Kind)
			}
			assert.Equal(t, tt.want, kinds, "%+v", dirs)
			assert.Contains(t, dirs[0].Why, tt.wantWhy)
		})
	}
}

// A hostPath survives a pod only where the pod comes back on the same node (review 3, item 9: every hostPath
// was SameNodeOnly, so a member whose pod the scheduler put elsewhere was restarted onto an empty data dir).
func TestAHostPathOutlivesItsPodOnlyOnAPinnedNode(t *testing.T) {
	affinity := func(terms ...corev1.NodeSelectorTerm) *corev1.Affinity {
		return &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{RequiredDuringSchedulingIgnoredDuringExecution: &corev1.NodeSelector{NodeSelectorTerms: terms}}}
	}
	hostIn := func(nodes ...string) corev1.NodeSelectorTerm {
		return corev1.NodeSelectorTerm{MatchExpressions: []corev1.NodeSelectorRequirement{{Key: corev1.LabelHostname, Operator: corev1.NodeSelectorOpIn, Values: nodes}}}
	}
	zone := corev1.NodeSelectorTerm{MatchExpressions: []corev1.NodeSelectorRequirement{{Key: corev1.LabelTopologyZone, Operator: corev1.NodeSelectorOpIn, Values: []string{"a"}}}}
	nameIs := corev1.NodeSelectorTerm{MatchFields: []corev1.NodeSelectorRequirement{{Key: "metadata.name", Operator: corev1.NodeSelectorOpIn, Values: []string{"node-a"}}}}
	for _, tt := range []struct {
		name string
		spec corev1.PodSpec
		want Kind
	}{
		{"no pinning", corev1.PodSpec{}, AnyNode},
		{"a nodeName", corev1.PodSpec{NodeName: "node-a"}, SameNodeOnly},
		{"a hostname nodeSelector", corev1.PodSpec{NodeSelector: map[string]string{corev1.LabelHostname: "node-a"}}, SameNodeOnly},
		{"another nodeSelector", corev1.PodSpec{NodeSelector: map[string]string{"disk": "ssd"}}, AnyNode},
		{"a required affinity to one node", corev1.PodSpec{Affinity: affinity(hostIn("node-a"))}, SameNodeOnly},
		{"the same node by its name field", corev1.PodSpec{Affinity: affinity(nameIs, hostIn("node-a"))}, SameNodeOnly},
		{"a required affinity to two nodes", corev1.PodSpec{Affinity: affinity(hostIn("node-a", "node-b"))}, AnyNode},
		{"two terms, two nodes", corev1.PodSpec{Affinity: affinity(hostIn("node-a"), hostIn("node-b"))}, AnyNode},
		{"a zone", corev1.PodSpec{Affinity: affinity(zone)}, AnyNode},
	} {
		t.Run(tt.name, func(t *testing.T) {
			tt.spec.Volumes = []corev1.Volume{{Name: "node", VolumeSource: corev1.VolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: "/srv/etcd"}}}}
			c := &corev1.Container{Name: "etcd", VolumeMounts: []corev1.VolumeMount{{Name: "node", MountPath: "/data"}}}
			dirs := Of(Template{Spec: &tt.spec, Container: c, FlagValues: map[string]string{"data-dir": "/data"}})
			assert.Equal(t, tt.want, dirs[0].Kind, dirs[0].Why)
			assert.False(t, dirs[0].Kind.Lost(), "neither is replaced: one is restarted, the other refused")
		})
	}
}

func TestKindLost(t *testing.T) {
	for kind, lost := range map[Kind]bool{Unknown: false, SurvivesPod: false, SameNodeOnly: false, AnyNode: false, DiesWithPod: true, DiesWithContainer: true} {
		assert.Equal(t, lost, kind.Lost(), kind)
	}
}
