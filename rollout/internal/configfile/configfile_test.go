package configfile

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"
)

func TestLocate(t *testing.T) {
	spec := &corev1.PodSpec{Volumes: []corev1.Volume{
		{Name: "conf", VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{LocalObjectReference: corev1.LocalObjectReference{Name: "etcd-conf"}}}},
		{Name: "mapped", VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{LocalObjectReference: corev1.LocalObjectReference{Name: "etcd-conf"},
			Items: []corev1.KeyToPath{{Key: "etcd.conf.yml", Path: "etcd/config.yaml"}}}}},
		{Name: "secret", VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{SecretName: "etcd-conf-secret"}}},
		{Name: "projected", VolumeSource: corev1.VolumeSource{Projected: &corev1.ProjectedVolumeSource{}}},
	}}
	mount := func(name, at, subPath string) corev1.VolumeMount {
		return corev1.VolumeMount{Name: name, MountPath: at, SubPath: subPath}
	}
	tests := []struct {
		name    string
		mounts  []corev1.VolumeMount
		file    string
		want    Source
		wantErr string
	}{
		{"a key of a ConfigMap volume", []corev1.VolumeMount{mount("conf", "/etc/etcd", "")}, "/etc/etcd/etcd.yaml",
			Source{ConfigMap, "etcd-conf", "etcd.yaml"}, ""},
		{"an item mapped to another path", []corev1.VolumeMount{mount("mapped", "/config", "")}, "/config/etcd/config.yaml",
			Source{ConfigMap, "etcd-conf", "etcd.conf.yml"}, ""},
		{"a single key mounted with subPath", []corev1.VolumeMount{mount("conf", "/etc/etcd/etcd.yaml", "etcd.yaml")}, "/etc/etcd/etcd.yaml",
			Source{ConfigMap, "etcd-conf", "etcd.yaml"}, ""},
		{"a Secret volume", []corev1.VolumeMount{mount("secret", "/etc/etcd", "")}, "/etc/etcd/etcd.yaml",
			Source{Secret, "etcd-conf-secret", "etcd.yaml"}, ""},
		{"the longest mount wins", []corev1.VolumeMount{mount("secret", "/etc", ""), mount("conf", "/etc/etcd", "")}, "/etc/etcd/etcd.yaml",
			Source{ConfigMap, "etcd-conf", "etcd.yaml"}, ""},
		{"a path with no item", []corev1.VolumeMount{mount("mapped", "/config", "")}, "/config/etcd.yaml", Source{}, "no item of ConfigMap etcd-conf is mounted at"},
		{"a projected volume", []corev1.VolumeMount{mount("projected", "/etc/etcd", "")}, "/etc/etcd/etcd.yaml", Source{}, "neither a ConfigMap nor a Secret"},
		{"a file of the image", []corev1.VolumeMount{mount("conf", "/config", "")}, "/etc/etcd/etcd.yaml", Source{}, "on no volume"},
		{"a path the shell expands", nil, "$CONF", Source{}, "not an absolute path"},
		{"a volume the pod does not define", []corev1.VolumeMount{mount("gone", "/etc/etcd", "")}, "/etc/etcd/etcd.yaml", Source{}, "does not define"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := Locate(spec, &corev1.Container{Name: "etcd", VolumeMounts: tt.mounts}, tt.file)
			if tt.wantErr != "" {
				require.ErrorIs(t, err, ErrNotReadable)
				assert.Contains(t, err.Error(), tt.wantErr)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tt.want, got)
		})
	}
}

func TestParse(t *testing.T) {
	tests := []struct {
		name    string
		content string
		want    Settings
		wantErr bool
	}{
		{"etcd's sample file", "name: 'etcd-0'\ndata-dir: /var/lib/etcd\nwal-dir:\nsnapshot-count: 10000\ninitial-cluster-state: 'existing'\n",
			Settings{Name: "etcd-0", DataDir: "/var/lib/etcd"}, false},
		{"a WAL dir", "data-dir: /data\nwal-dir: /wal\n", Settings{DataDir: "/data", WALDir: "/wal"}, false},
		{"no data dir", "name: etcd-1\n", Settings{Name: "etcd-1"}, false},
		{"not YAML", "data-dir: [unclosed\nclient-transport-security: {key-file: hunter2", Settings{}, true},
		{"a data dir that is not a string", "data-dir:\n  nested: hunter2\n", Settings{}, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := Parse([]byte(tt.content))
			if tt.wantErr {
				require.Error(t, err)
				assert.NotContains(t, err.Error(), "hunter2", "the error quotes the file's content")
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tt.want, got)
		})
	}
}

func TestReaderRead(t *testing.T) {
	kube := fake.NewSimpleClientset(
		&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "db", Name: "etcd-conf"}, Data: map[string]string{"etcd.yaml": "data-dir: /scratch/etcd\n"}},
		&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "db", Name: "etcd-conf-secret"}, Data: map[string][]byte{"etcd.yaml": []byte("data-dir: /var/lib/etcd\nwal-dir: /wal\n")}},
	)
	volume := func(name string, src corev1.VolumeSource) *corev1.PodSpec {
		return &corev1.PodSpec{Volumes: []corev1.Volume{{Name: name, VolumeSource: src}}}
	}
	configMap := volume("conf", corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{LocalObjectReference: corev1.LocalObjectReference{Name: "etcd-conf"}}})
	secret := volume("conf", corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{SecretName: "etcd-conf-secret"}})
	missing := volume("conf", corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{LocalObjectReference: corev1.LocalObjectReference{Name: "nobody"}}})
	c := &corev1.Container{Name: "etcd", VolumeMounts: []corev1.VolumeMount{{Name: "conf", MountPath: "/etc/etcd"}}}
	tests := []struct {
		name    string
		spec    *corev1.PodSpec
		file    string
		want    Settings
		wantErr string
	}{
		{"from a ConfigMap", configMap, "/etc/etcd/etcd.yaml", Settings{DataDir: "/scratch/etcd"}, ""},
		{"from a Secret", secret, "/etc/etcd/etcd.yaml", Settings{DataDir: "/var/lib/etcd", WALDir: "/wal"}, ""},
		{"a key the ConfigMap does not have", configMap, "/etc/etcd/other.yaml", Settings{}, `ConfigMap etcd-conf (key "other.yaml") has no such key`},
		{"a ConfigMap that does not exist", missing, "/etc/etcd/etcd.yaml", Settings{}, `reading db/ConfigMap nobody (key "etcd.yaml")`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := NewReader(kube, "db", nil).Read(context.Background(), tt.spec, c, tt.file)
			if tt.wantErr != "" {
				require.Error(t, err)
				assert.Contains(t, err.Error(), tt.wantErr)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tt.want, got)
		})
	}
}
