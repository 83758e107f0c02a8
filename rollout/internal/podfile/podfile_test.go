package podfile

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
	ref := func(name string) corev1.LocalObjectReference { return corev1.LocalObjectReference{Name: name} }
	spec := &corev1.PodSpec{Volumes: []corev1.Volume{
		{Name: "conf", VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{LocalObjectReference: ref("etcd-conf")}}},
		{Name: "mapped", VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{LocalObjectReference: ref("etcd-conf"),
			Items: []corev1.KeyToPath{{Key: "etcd.conf.yml", Path: "etcd/config.yaml"}}}}},
		{Name: "tls", VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{SecretName: "etcd-tls",
			Items: []corev1.KeyToPath{{Key: "tls.crt", Path: "client/cert.pem"}}}}},
		{Name: "secret", VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{SecretName: "etcd-peer"}}},
		{Name: "projected", VolumeSource: corev1.VolumeSource{Projected: &corev1.ProjectedVolumeSource{Sources: []corev1.VolumeProjection{
			{ConfigMap: &corev1.ConfigMapProjection{LocalObjectReference: ref("ca")}},
			{Secret: &corev1.SecretProjection{LocalObjectReference: ref("client")}},
			{Secret: &corev1.SecretProjection{LocalObjectReference: ref("peer"), Items: []corev1.KeyToPath{{Key: "tls.crt", Path: "peer.crt"}}}},
		}}}},
		{Name: "scratch", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}},
	}}
	mount := func(name, at, subPath string) corev1.VolumeMount {
		return corev1.VolumeMount{Name: name, MountPath: at, SubPath: subPath}
	}
	tests := []struct {
		name    string
		mounts  []corev1.VolumeMount
		file    string
		want    []Source
		wantErr string
	}{
		{"a key of a ConfigMap volume", []corev1.VolumeMount{mount("conf", "/etc/etcd", "")}, "/etc/etcd/etcd.yaml",
			[]Source{{ConfigMap, "etcd-conf", "etcd.yaml"}}, ""},
		{"an item mapped to another path", []corev1.VolumeMount{mount("mapped", "/config", "")}, "/config/etcd/config.yaml",
			[]Source{{ConfigMap, "etcd-conf", "etcd.conf.yml"}}, ""},
		{"a Secret item under a trailing-slash mount", []corev1.VolumeMount{mount("tls", "/pki/", "")}, "/pki/client/cert.pem",
			[]Source{{Secret, "etcd-tls", "tls.crt"}}, ""},
		{"a single key mounted with subPath", []corev1.VolumeMount{mount("secret", "/certs/ca.pem", "ca.crt")}, "/certs/ca.pem",
			[]Source{{Secret, "etcd-peer", "ca.crt"}}, ""},
		{"the longest mount wins", []corev1.VolumeMount{mount("scratch", "/var/lib", ""), mount("secret", "/var/lib/etcd-tls", "")}, "/var/lib/etcd-tls/peer.key",
			[]Source{{Secret, "etcd-peer", "peer.key"}}, ""},
		{"a projected volume: every source that can hold the path, in order", []corev1.VolumeMount{mount("projected", "/tls", "")}, "/tls/client.crt",
			[]Source{{ConfigMap, "ca", "client.crt"}, {Secret, "client", "client.crt"}}, ""},
		{"a projected item", []corev1.VolumeMount{mount("projected", "/tls", "")}, "/tls/peer.crt",
			[]Source{{ConfigMap, "ca", "peer.crt"}, {Secret, "client", "peer.crt"}, {Secret, "peer", "tls.crt"}}, ""},
		{"a path with no item", []corev1.VolumeMount{mount("mapped", "/config", "")}, "/config/etcd.yaml", nil, `no key of volume "mapped" is mounted at`},
		{"an emptyDir", []corev1.VolumeMount{mount("scratch", "/data", "")}, "/data/ca.crt", nil, "which no Secret or ConfigMap backs"},
		{"a file of the image", []corev1.VolumeMount{mount("conf", "/config", "")}, "/etc/etcd/etcd.yaml", nil, "on no volume"},
		{"a prefix that is not a directory", []corev1.VolumeMount{mount("conf", "/pki", "")}, "/pkix/ca.crt", nil, "on no volume"},
		{"a path the shell expands", nil, "$CONF", nil, "not an absolute path"},
		{"a volume the pod does not define", []corev1.VolumeMount{mount("gone", "/etc/etcd", "")}, "/etc/etcd/etcd.yaml", nil, "does not define"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, _, err := Locate(spec, &corev1.Container{Name: "etcd", VolumeMounts: tt.mounts}, tt.file)
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

func TestReaderRead(t *testing.T) {
	kube := fake.NewClientset(
		&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "db", Name: "ca"}, Data: map[string]string{"ca.crt": "the CA"}},
		&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "db", Name: "client"}, Data: map[string][]byte{"client.crt": []byte("the leaf")}},
	)
	spec := &corev1.PodSpec{Volumes: []corev1.Volume{{Name: "tls", VolumeSource: corev1.VolumeSource{Projected: &corev1.ProjectedVolumeSource{
		Sources: []corev1.VolumeProjection{
			{ConfigMap: &corev1.ConfigMapProjection{LocalObjectReference: corev1.LocalObjectReference{Name: "ca"}}},
			{Secret: &corev1.SecretProjection{LocalObjectReference: corev1.LocalObjectReference{Name: "client"}}},
			{Secret: &corev1.SecretProjection{LocalObjectReference: corev1.LocalObjectReference{Name: "not-yet-created"}}},
		}}}}}}
	c := &corev1.Container{Name: "etcd", VolumeMounts: []corev1.VolumeMount{{Name: "tls", MountPath: "/tls"}}}
	tests := []struct {
		file, want string
		wantSrc    Source
		wantErr    string
	}{
		{"/tls/ca.crt", "the CA", Source{ConfigMap, "ca", "ca.crt"}, ""},
		{"/tls/client.crt", "the leaf", Source{Secret, "client", "client.crt"}, ""},
		{"/tls/client.key", "", Source{}, `reading /tls/client.key: no such key in db/ConfigMap ca (key "client.key"), Secret client (key "client.key"), Secret not-yet-created (key "client.key")`},
	}
	r := NewReader(kube, "db", nil)
	for _, tt := range tests {
		t.Run(tt.file, func(t *testing.T) {
			got, src, err := r.Memo().Read(context.Background(), spec, c, tt.file)
			if tt.wantErr != "" {
				require.ErrorIs(t, err, ErrNoSuchKey)
				assert.Contains(t, err.Error(), tt.wantErr)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tt.want, string(got))
			assert.Equal(t, tt.wantSrc, src)
		})
	}
	one := &corev1.PodSpec{Volumes: []corev1.Volume{{Name: "tls", VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{SecretName: "gone"}}}}}
	_, _, err := r.Read(context.Background(), one, c, "/tls/ca.crt")
	require.Error(t, err, "a Secret that does not exist")
	assert.Contains(t, err.Error(), `reading /tls/ca.crt from db/Secret gone (key "ca.crt"): secrets "gone" not found`)
}

// One look reads each object once, whichever of its keys are asked for: a CA, a certificate and its key from
// one Secret cost one GET.
func TestMemoReadsEachObjectOnce(t *testing.T) {
	kube := fake.NewClientset(&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "db", Name: "peer"},
		Data: map[string][]byte{"ca.crt": []byte("ca"), "tls.crt": []byte("leaf"), "tls.key": []byte("key")}})
	spec := &corev1.PodSpec{Volumes: []corev1.Volume{{Name: "tls", VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{SecretName: "peer"}}}}}
	c := &corev1.Container{Name: "etcd", VolumeMounts: []corev1.VolumeMount{{Name: "tls", MountPath: "/tls"}}}
	files := NewReader(kube, "db", nil).Memo()
	for _, f := range []string{"/tls/ca.crt", "/tls/tls.crt", "/tls/tls.key", "/tls/ca.crt"} {
		_, _, err := files.Read(context.Background(), spec, c, f)
		require.NoError(t, err)
	}
	assert.Len(t, kube.Actions(), 1, "one GET of Secret peer")
}
