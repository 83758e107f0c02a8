package harness_test

import (
	"crypto/x509"
	"encoding/pem"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/etcd-rollout/pulumi-etcd-rollout/tests/harness"
)

// The server and peer certificates verify for every member's DNS name and for 127.0.0.1 (where members and
// port-forwards listen here), for both server and client use (peers dial each other); the client
// certificate is for clients only.
func TestGenerateTLSNamesEveryMember(t *testing.T) {
	spec, err := harness.EtcdSpec{Name: "keyspace-etcd-group-0", ServiceName: "keyspace-etcd-group-0-peer"}.WithDefaults()
	require.NoError(t, err)
	m, err := harness.GenerateTLS(spec, "ns1")
	require.NoError(t, err)
	roots := x509.NewCertPool()
	require.True(t, roots.AppendCertsFromPEM(m.CA))

	tests := []struct {
		name  string
		cert  []byte
		host  string
		usage x509.ExtKeyUsage
		ok    bool
	}{
		{"server for pod 2", m.ServerCert, "keyspace-etcd-group-0-2.keyspace-etcd-group-0-peer.ns1.svc", x509.ExtKeyUsageServerAuth, true},
		{"server for loopback", m.ServerCert, "127.0.0.1", x509.ExtKeyUsageServerAuth, true},
		{"server in another namespace", m.ServerCert, "keyspace-etcd-group-0-2.keyspace-etcd-group-0-peer.ns2.svc", x509.ExtKeyUsageServerAuth, false},
		{"peer dials peer", m.PeerCert, "keyspace-etcd-group-0-0.keyspace-etcd-group-0-peer.ns1.svc", x509.ExtKeyUsageClientAuth, true},
		{"client as client", m.ClientCert, "", x509.ExtKeyUsageClientAuth, true},
		{"client cannot serve", m.ClientCert, "", x509.ExtKeyUsageServerAuth, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			block, _ := pem.Decode(tt.cert)
			require.NotNil(t, block)
			cert, err := x509.ParseCertificate(block.Bytes)
			require.NoError(t, err)
			_, err = cert.Verify(x509.VerifyOptions{Roots: roots, DNSName: tt.host, KeyUsages: []x509.ExtKeyUsage{tt.usage}})
			assert.Equal(t, tt.ok, err == nil, "verify: %v", err)
		})
	}
	_, err = m.ClientConfig()
	require.NoError(t, err)
	assert.Len(t, m.SecretData(), 7)
}
