package member

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"net"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// A member's listener names the CAs its process trusts in the handshake: SeeTrust reads them without
// presenting a certificate, under TLS 1.3 and 1.2, with the chain it serves; a listener that asks for no
// client certificate names none.
func TestSeeTrustReadsTheCAsAMemberAnnounces(t *testing.T) {
	oldCA, newCA := newTestCA(t), newTestCA(t)
	served := oldCA.issueFor(t, x509.ExtKeyUsageServerAuth, []net.IP{net.ParseIP("127.0.0.1")}, "etcd-0.etcd-headless.db.svc")
	for _, tc := range []struct {
		name       string
		trusted    []testCA
		maxVersion uint16
	}{
		{"one CA, TLS 1.3", []testCA{oldCA}, tls.VersionTLS13},
		{"widened to two, TLS 1.2", []testCA{oldCA, newCA}, tls.VersionTLS12},
	} {
		t.Run(tc.name, func(t *testing.T) {
			pool := x509.NewCertPool()
			for _, ca := range tc.trusted {
				pool.AddCert(ca.cert)
			}
			addr := servePeer(t, served, pool, tc.maxVersion)
			seen, err := NewClients(addrDialer{addr}, "db", "etcd-headless", 2379, nil).SeeTrust(context.Background(), "etcd-0", 2380)
			require.NoError(t, err)
			assert.True(t, seen.AsksClientCert)
			require.Len(t, seen.AcceptableCAs, len(tc.trusted))
			for i, ca := range tc.trusted {
				assert.Equal(t, ca.cert.RawSubject, seen.AcceptableCAs[i])
			}
			require.NotEmpty(t, seen.Served)
			assert.Equal(t, served.Certificate[0], seen.Served[0].Raw)
		})
	}
	t.Run("no client certificates asked", func(t *testing.T) {
		ln, err := tls.Listen("tcp", "127.0.0.1:0", &tls.Config{Certificates: []tls.Certificate{served}})
		require.NoError(t, err)
		serveEach(t, ln, func(c net.Conn) {
			_ = c.(*tls.Conn).Handshake()
			_ = c.Close()
		})
		seen, err := NewClients(addrDialer{ln.Addr().String()}, "db", "etcd-headless", 2379, nil).SeeTrust(context.Background(), "etcd-0", 2379)
		require.NoError(t, err)
		assert.False(t, seen.AsksClientCert)
		assert.Empty(t, seen.AcceptableCAs)
	})
}
