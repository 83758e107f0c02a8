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
		{"a hostPath", container("", mount("node", "/data")), nil,
			map[string]string{"data-dir": "/data"}, nil, []Kind{SameNodeOnly}, "hostPath"},
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

func TestKindLost(t *testing.T) {
	for kind, lost := range map[Kind]bool{Unknown: false, SurvivesPod: false, SameNodeOnly: false, DiesWithPod: true, DiesWithContainer: true} {
		assert.Equal(t, lost, kind.Lost(), kind)
	}
}
