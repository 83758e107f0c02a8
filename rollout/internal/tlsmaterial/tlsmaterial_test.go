package tlsmaterial

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/etcd-rollout/pulumi-etcd-rollout/rollout/internal/podfile"
)

func selfSigned(t *testing.T) (certPEM, keyPEM []byte) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	require.NoError(t, err)
	tpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "test"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour), IsCA: true, BasicConstraintsValid: true}
	der, err := x509.CreateCertificate(rand.Reader, tpl, tpl, &key.PublicKey, key)
	require.NoError(t, err)
	kder, err := x509.MarshalECPrivateKey(key)
	require.NoError(t, err)
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kder})
}

func tlsPod(volumes []corev1.Volume, mounts []corev1.VolumeMount) *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "etcd-0", Namespace: "db"},
		Spec: corev1.PodSpec{
			Containers: []corev1.Container{{Name: "sidecar"}, {Name: "etcd", VolumeMounts: mounts}},
			Volumes:    volumes,
		},
	}
}

// The container whose volume holds a file is the one with the deepest mount path containing it (the pod's
// other containers are looked at too); which object key backs it is podfile's answer (its own tests).
func TestContainerWithMount(t *testing.T) {
	secretVol := corev1.Volume{Name: "tls", VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{SecretName: "etcd-tls"}}}
	tests := []struct {
		name       string
		mounts     []corev1.VolumeMount
		file       string
		wantMount  bool
		wantSource string
	}{
		{"a secret volume", []corev1.VolumeMount{{Name: "tls", MountPath: "/etc/etcd/pki"}}, "/etc/etcd/pki/ca.crt", true, `Secret etcd-tls (key "ca.crt")`},
		{"deepest mount wins", []corev1.VolumeMount{{Name: "data", MountPath: "/var/lib"}, {Name: "tls", MountPath: "/var/lib/etcd-tls"}},
			"/var/lib/etcd-tls/client.key", true, `Secret etcd-tls (key "client.key")`},
		{"not mounted", []corev1.VolumeMount{{Name: "tls", MountPath: "/pki"}}, "/etc/other/ca.crt", false, ""},
		{"a prefix that is not a directory does not match", []corev1.VolumeMount{{Name: "tls", MountPath: "/pki"}}, "/pkix/ca.crt", false, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			pod := tlsPod([]corev1.Volume{secretVol, {Name: "data", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}}}, tt.mounts)
			c, ok := containerWithMount(pod, tt.file)
			require.Equal(t, tt.wantMount, ok)
			if !ok {
				return
			}
			assert.Equal(t, "etcd", c.Name)
			sources, _, err := podfile.Locate(&pod.Spec, c, tt.file)
			require.NoError(t, err)
			assert.Equal(t, tt.wantSource, sources[0].String())
		})
	}
}

func TestClientTLSFromSecret(t *testing.T) {
	cert, key := selfSigned(t)
	kube := fake.NewClientset(&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "etcd-tls", Namespace: "db"},
		Data: map[string][]byte{"ca.crt": cert, "client.crt": cert, "client.key": key}})
	pod := tlsPod([]corev1.Volume{{Name: "tls", VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{SecretName: "etcd-tls"}}}},
		[]corev1.VolumeMount{{Name: "tls", MountPath: "/var/lib/etcd-tls"}})
	read := PodFileReader(kube, nil, pod)
	files := Files{CAFile: "/var/lib/etcd-tls/ca.crt", CertFile: "/var/lib/etcd-tls/client.crt", KeyFile: "/var/lib/etcd-tls/client.key"}

	cfg, err := ClientTLS(context.Background(), read, files)
	require.NoError(t, err)
	assert.Len(t, cfg.Certificates, 1)
	assert.NotNil(t, cfg.RootCAs)
	assert.False(t, cfg.InsecureSkipVerify, "verification is always on")

	t.Run("a missing key names the file and the secret, never the material", func(t *testing.T) {
		bad := files
		bad.KeyFile = "/var/lib/etcd-tls/missing.key"
		_, err := ClientTLS(context.Background(), read, bad)
		require.Error(t, err)
		assert.Contains(t, err.Error(), `tls keyFile: reading /var/lib/etcd-tls/missing.key: no such key in db/Secret etcd-tls (key "missing.key")`)
		assert.NotContains(t, err.Error(), string(key[:40]))
	})
	t.Run("a mismatched pair says which files, never the material", func(t *testing.T) {
		otherCert, _ := selfSigned(t)
		kube := fake.NewClientset(&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "etcd-tls", Namespace: "db"},
			Data: map[string][]byte{"ca.crt": cert, "client.crt": otherCert, "client.key": key}})
		_, err := ClientTLS(context.Background(), PodFileReader(kube, nil, pod), files)
		require.Error(t, err)
		assert.Equal(t, "tls certFile /var/lib/etcd-tls/client.crt and keyFile /var/lib/etcd-tls/client.key do not form a valid key pair", err.Error())
	})
	t.Run("a file outside every mount is named", func(t *testing.T) {
		bad := files
		bad.CAFile = "/etc/ssl/ca.crt"
		_, err := ClientTLS(context.Background(), read, bad)
		assert.EqualError(t, err, "tls caFile: /etc/ssl/ca.crt is not under any volume mounted in pod etcd-0")
	})
}
