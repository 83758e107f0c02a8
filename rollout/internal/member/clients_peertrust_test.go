package member

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"net"
	"net/http"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/etcd-rollout/pulumi-etcd-rollout/rollout/internal/trust"
)

// servePeer is a member's peer port as etcd serves it with --peer-client-cert-auth: its peer leaf, a trust
// pool frozen at start, client certificates required, /version on the mux.
func servePeer(t *testing.T, leaf tls.Certificate, trusted *x509.CertPool, maxVersion uint16) string {
	t.Helper()
	ln, err := tls.Listen("tcp", "127.0.0.1:0", &tls.Config{Certificates: []tls.Certificate{leaf}, ClientCAs: trusted,
		ClientAuth: tls.RequireAndVerifyClientCert, MaxVersion: maxVersion})
	require.NoError(t, err)
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		fmt.Fprint(w, `{"etcdserver":"3.6.8","etcdcluster":"3.6.0"}`)
	}), ErrorLog: nil}
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() { _ = srv.Close() })
	return ln.Addr().String()
}

// A probe presents the new peer leaf to a running member's peer port and reads its answer: accepted when the
// member's trust holds the leaf's CA, refused (with the alert) when not, under TLS 1.3 (reported on the first
// read) and TLS 1.2 (within the handshake); the chain the member serves comes back either way, even when
// the probe's roots (the new trust) do not hold its CA.
func TestProbePeerTrust(t *testing.T) {
	oldCA, newCA := newTestCA(t), newTestCA(t)
	served := oldCA.issueFor(t, x509.ExtKeyUsageServerAuth, []net.IP{net.ParseIP("127.0.0.1")}, "etcd-0.etcd-headless.db.svc")
	pool := func(cas ...testCA) *x509.CertPool {
		p := x509.NewCertPool()
		for _, ca := range cas {
			p.AddCert(ca.cert)
		}
		return p
	}
	both := func(ca testCA) tls.Certificate {
		return ca.sign(t, func(c *x509.Certificate) {
			c.DNSNames = []string{"etcd-2.etcd-headless.db.svc"}
			c.ExtKeyUsage = []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth}
		})
	}
	tests := []struct {
		name       string
		memberCAs  *x509.CertPool // the running member's peer trust
		maxVersion uint16
		leaf       tls.Certificate
		roots      *x509.CertPool // the new trust the probe verifies the served leaf with
		want       trust.Verdict
	}{
		{"a leaf of a trusted CA", pool(oldCA), tls.VersionTLS13, both(oldCA), pool(oldCA), trust.Accepted},
		{"a leaf of a CA the member does not trust, TLS 1.3", pool(oldCA), tls.VersionTLS13, both(newCA), pool(oldCA, newCA), trust.Refused},
		{"a leaf of a CA the member does not trust, TLS 1.2", pool(oldCA), tls.VersionTLS12, both(newCA), pool(oldCA, newCA), trust.Refused},
		{"a widened member accepts the new leaf", pool(oldCA, newCA), tls.VersionTLS13, both(newCA), pool(oldCA, newCA), trust.Accepted},
		{"new roots that refuse the served leaf still learn the verdict", pool(oldCA, newCA), tls.VersionTLS13, both(newCA), pool(newCA), trust.Accepted},
		{"and a refusal", pool(oldCA), tls.VersionTLS13, both(newCA), pool(newCA), trust.Refused},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			addr := servePeer(t, served, tt.memberCAs, tt.maxVersion)
			m := NewClients(addrDialer{addr}, "db", "etcd-headless", 2379, nil)
			got, err := m.ProbePeerTrust(context.Background(), "etcd-0", 2380, tt.leaf, tt.roots, "etcd-0.etcd-headless.db.svc")
			require.NoError(t, err)
			assert.Equal(t, tt.want, got.Verdict, "alert %q", got.Alert)
			if tt.want == trust.Refused {
				assert.Contains(t, got.Alert, "remote error: tls: ")
			}
			require.NotEmpty(t, got.Served, "the member's served chain")
			assert.Equal(t, served.Certificate[0], got.Served[0].Raw)
		})
	}
}

// etcd's peer listener checks a client certificate's SANs against the address the connection came from, after
// the handshake, and closes the connection without an alert when they do not match: through a port-forward
// every DNS-only leaf ends that way. Such a probe has no verdict, never an acceptance, and keeps the chain the
// member served (review 3, item 3: it was dropped as an error, and the new trust was never judged against it).
func TestAProbeTheMemberClosesWithoutAnswerHasNoVerdictAndKeepsTheChain(t *testing.T) {
	ca := newTestCA(t)
	served := ca.issueFor(t, x509.ExtKeyUsageServerAuth, nil, "etcd-0.etcd-headless.db.svc")
	trusted := x509.NewCertPool()
	trusted.AddCert(ca.cert)
	ln, err := tls.Listen("tcp", "127.0.0.1:0", &tls.Config{Certificates: []tls.Certificate{served}, ClientCAs: trusted, ClientAuth: tls.RequireAndVerifyClientCert})
	require.NoError(t, err)
	serveEach(t, ln, func(conn net.Conn) {
		_ = conn.(*tls.Conn).Handshake() // then the SAN check fails: closed, no alert
		_ = conn.Close()
	})
	leaf := ca.sign(t, func(c *x509.Certificate) {
		c.DNSNames = []string{"etcd-2.etcd-headless.db.svc"}
		c.ExtKeyUsage = []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth}
	})
	m := NewClients(addrDialer{ln.Addr().String()}, "db", "etcd-headless", 2379, nil)
	got, err := m.ProbePeerTrust(context.Background(), "etcd-0", 2380, leaf, trusted, "etcd-0.etcd-headless.db.svc")
	require.NoError(t, err)
	assert.Equal(t, trust.Undecided, got.Verdict)
	assert.Contains(t, got.Alert, "closed the connection without answering")
	require.NotEmpty(t, got.Served, "the chain the member served in the handshake")
	assert.Equal(t, served.Certificate[0], got.Served[0].Raw)
}
