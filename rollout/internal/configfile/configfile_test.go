package configfile

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/etcd-rollout/pulumi-etcd-rollout/rollout/internal/podfile"
)

func TestParse(t *testing.T) {
	tests := []struct {
		name    string
		content string
		want    Settings
		wantErr bool
	}{
		{"etcd's sample file", "name: 'etcd-0'\ndata-dir: /var/lib/etcd\nwal-dir:\nsnapshot-count: 10000\ninitial-cluster-state: 'existing'\n",
			Settings{Name: "etcd-0", DataDir: "/var/lib/etcd", InitialClusterState: "existing"}, false},
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

func TestRead(t *testing.T) {
	kube := fake.NewSimpleClientset(
		&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "db", Name: "etcd-conf"}, Data: map[string]string{"etcd.yaml": "data-dir: /scratch/etcd\n"}},
		&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "db", Name: "etcd-conf-secret"}, Data: map[string][]byte{"etcd.yaml": []byte("data-dir: /var/lib/etcd\nwal-dir: /wal\n"), "bad.yaml": []byte("data-dir: [hunter2")}},
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
		{"a key the ConfigMap does not have", configMap, "/etc/etcd/other.yaml", Settings{}, `no such key in db/ConfigMap etcd-conf (key "other.yaml")`},
		{"a ConfigMap that does not exist", missing, "/etc/etcd/etcd.yaml", Settings{}, `reading /etc/etcd/etcd.yaml from db/ConfigMap nobody (key "etcd.yaml")`},
		{"content that is not etcd's YAML", secret, "/etc/etcd/bad.yaml", Settings{}, `Secret etcd-conf-secret (key "bad.yaml"), mounted at /etc/etcd/bad.yaml: its content is not a YAML map`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := Read(context.Background(), podfile.NewReader(kube, "db", nil).Memo(), tt.spec, c, tt.file)
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
