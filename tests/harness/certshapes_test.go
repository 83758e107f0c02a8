package harness_test

import (
	"crypto/x509"
	"encoding/pem"
	"net"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/etcd-rollout/pulumi-etcd-rollout/tests/harness"
	"github.com/etcd-rollout/pulumi-etcd-rollout/tests/harness/memberapi"
)

func parseCert(t *testing.T, certPEM []byte) *x509.Certificate {
	t.Helper()
	block, _ := pem.Decode(certPEM)
	require.NotNil(t, block)
	cert, err := x509.ParseCertificate(block.Bytes)
	require.NoError(t, err)
	return cert
}

func shapeSpec(t *testing.T) harness.EtcdSpec {
	spec, err := harness.EtcdSpec{Name: "etcd", ServiceName: "etcd-headless"}.WithDefaults()
	require.NoError(t, err)
	return spec
}

// Each shape mints server and peer certificates that carry that shape's names and nothing else but the
// 127.0.0.1 IP SAN the members dial each other on here.
func TestGenerateTLSWithOneShape(t *testing.T) {
	tests := []struct {
		shape harness.CertShape
		dns   []string
	}{
		{harness.CertShapePod, []string{"etcd-0.etcd-headless.ns1", "etcd-1.etcd-headless.ns1", "etcd-2.etcd-headless.ns1"}},
		{harness.CertShapePodSvc, []string{"etcd-0.etcd-headless.ns1.svc", "etcd-1.etcd-headless.ns1.svc", "etcd-2.etcd-headless.ns1.svc"}},
		{harness.CertShapePodClusterLocal, []string{"etcd-0.etcd-headless.ns1.svc.cluster.local",
			"etcd-1.etcd-headless.ns1.svc.cluster.local", "etcd-2.etcd-headless.ns1.svc.cluster.local"}},
		{harness.CertShapeWildcard, []string{"*.etcd-headless.ns1"}},
		{harness.CertShapeWildcardSvc, []string{"*.etcd-headless.ns1.svc"}},
		{harness.CertShapeWildcardClusterLocal, []string{"*.etcd-headless.ns1.svc.cluster.local"}},
	}
	require.Len(t, tests, len(harness.AllCertShapes), "every shape is tested")
	for _, tt := range tests {
		t.Run(string(tt.shape), func(t *testing.T) {
			m, err := harness.GenerateTLSWith(shapeSpec(t), "ns1", harness.CertOptions{Shape: tt.shape})
			require.NoError(t, err)
			for _, certPEM := range [][]byte{m.ServerCert, m.PeerCert} {
				cert := parseCert(t, certPEM)
				assert.Equal(t, tt.dns, cert.DNSNames)
				require.Len(t, cert.IPAddresses, 1)
				assert.True(t, cert.IPAddresses[0].Equal(net.ParseIP("127.0.0.1")))
				assert.Empty(t, cert.URIs)
				assert.Empty(t, cert.EmailAddresses)
			}
			assert.Empty(t, m.ForeignCA)
		})
	}
}

// A shaped certificate verifies for its own shape only: pod 1's name in every shape, checked against the
// certificate of every shape.
func TestCertShapesVerifyOnlyTheirOwnNames(t *testing.T) {
	spec := shapeSpec(t)
	host := map[harness.CertShape]string{
		harness.CertShapePod: "etcd-1.etcd-headless.ns1", harness.CertShapePodSvc: "etcd-1.etcd-headless.ns1.svc",
		harness.CertShapePodClusterLocal: "etcd-1.etcd-headless.ns1.svc.cluster.local",
	}
	wildcardOf := map[harness.CertShape]harness.CertShape{harness.CertShapeWildcard: harness.CertShapePod,
		harness.CertShapeWildcardSvc: harness.CertShapePodSvc, harness.CertShapeWildcardClusterLocal: harness.CertShapePodClusterLocal}
	for _, certShape := range harness.AllCertShapes {
		m, err := harness.GenerateTLSWith(spec, "ns1", harness.CertOptions{Shape: certShape})
		require.NoError(t, err)
		roots := x509.NewCertPool()
		require.True(t, roots.AppendCertsFromPEM(m.CA))
		cert := parseCert(t, m.ServerCert)
		for dialShape, name := range host {
			want := certShape == dialShape || wildcardOf[certShape] == dialShape
			_, err := cert.Verify(x509.VerifyOptions{Roots: roots, DNSName: name, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}})
			assert.Equal(t, want, err == nil, "certificate %s dialled as %s: %v", certShape, name, err)
		}
	}
}

// The negative certificates: one that names only another member, one from a CA the clients do not trust.
func TestGenerateTLSNegativeCertificates(t *testing.T) {
	spec := shapeSpec(t)
	t.Run("names only etcd-0", func(t *testing.T) {
		m, err := harness.GenerateTLSWith(spec, "ns1", harness.CertOptions{OnlyPod: "etcd-0"})
		require.NoError(t, err)
		assert.Equal(t, []string{"etcd-0.etcd-headless.ns1.svc"}, parseCert(t, m.ServerCert).DNSNames)
		assert.Len(t, parseCert(t, m.PeerCert).DNSNames, 3, "peers keep every name")
	})
	t.Run("names only etcd-2 in the old Job's shape", func(t *testing.T) {
		m, err := harness.GenerateTLSWith(spec, "ns1", harness.CertOptions{Shape: harness.CertShapePod, OnlyPod: "etcd-2"})
		require.NoError(t, err)
		assert.Equal(t, []string{"etcd-2.etcd-headless.ns1"}, parseCert(t, m.ServerCert).DNSNames)
	})
	t.Run("foreign CA", func(t *testing.T) {
		m, err := harness.GenerateTLSWith(spec, "ns1", harness.CertOptions{ForeignCA: true})
		require.NoError(t, err)
		verify := func(ca, certPEM []byte) error {
			roots := x509.NewCertPool()
			require.True(t, roots.AppendCertsFromPEM(ca))
			_, err := parseCert(t, certPEM).Verify(x509.VerifyOptions{Roots: roots, DNSName: "etcd-0.etcd-headless.ns1.svc"})
			return err
		}
		assert.Error(t, verify(m.CA, m.ServerCert), "the cluster CA does not vouch for the server")
		assert.NoError(t, verify(m.ForeignCA, m.ServerCert))
		assert.NoError(t, verify(m.CA, m.PeerCert), "peers still trust each other")
		assert.Equal(t, m.ForeignCA, m.SecretData()[memberapi.SecretForeignCA])
	})
	for name, o := range map[string]harness.CertOptions{
		"unknown shape":          {Shape: "etcd-0"},
		"wildcard for one pod":   {Shape: harness.CertShapeWildcardSvc, OnlyPod: "etcd-0"},
		"pod of another cluster": {OnlyPod: "etcd-3"},
	} {
		t.Run(name, func(t *testing.T) {
			_, err := harness.GenerateTLSWith(spec, "ns1", o)
			assert.Error(t, err)
		})
	}
}
