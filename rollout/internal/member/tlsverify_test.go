package member

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"math/big"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// testCA is a throwaway certificate authority for the TLS verification tests; chain holds the intermediates
// between it and the root, which a server presents after its leaf.
type testCA struct {
	cert  *x509.Certificate
	key   *ecdsa.PrivateKey
	chain [][]byte
}

func newTestCA(t *testing.T) testCA {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	require.NoError(t, err)
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "test-ca"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	require.NoError(t, err)
	cert, err := x509.ParseCertificate(der)
	require.NoError(t, err)
	return testCA{cert: cert, key: key}
}

// intermediate returns a CA signed by ca, as clusters that keep their root offline have.
func (ca testCA) intermediate(t *testing.T) testCA {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	require.NoError(t, err)
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(2), Subject: pkix.Name{CommonName: "test-intermediate-ca"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.cert, &key.PublicKey, ca.key)
	require.NoError(t, err)
	cert, err := x509.ParseCertificate(der)
	require.NoError(t, err)
	return testCA{cert: cert, key: key, chain: append([][]byte{der}, ca.chain...)}
}

// issue signs a leaf for dnsNames (server) or a client certificate (no names).
func (ca testCA) issue(t *testing.T, usage x509.ExtKeyUsage, dnsNames ...string) tls.Certificate {
	t.Helper()
	return ca.issueFor(t, usage, nil, dnsNames...)
}

func (ca testCA) issueFor(t *testing.T, usage x509.ExtKeyUsage, ips []net.IP, dnsNames ...string) tls.Certificate {
	t.Helper()
	return ca.sign(t, func(c *x509.Certificate) {
		c.DNSNames, c.IPAddresses, c.ExtKeyUsage = dnsNames, ips, []x509.ExtKeyUsage{usage}
	})
}

// sign issues a leaf valid for the last hour and the next, changed by edit.
func (ca testCA) sign(t *testing.T, edit func(*x509.Certificate)) tls.Certificate {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	require.NoError(t, err)
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(time.Now().UnixNano()), Subject: pkix.Name{CommonName: "leaf"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}
	edit(tmpl)
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.cert, &key.PublicKey, ca.key)
	require.NoError(t, err)
	return tls.Certificate{Certificate: append([][]byte{der}, ca.chain...), PrivateKey: key}
}

// staticDialer hands out one address for every member: a stand-in for the port-forward.
type staticDialer struct{ addr string }

func (d staticDialer) Endpoint(context.Context, string, string, int) (string, error) {
	return d.addr, nil
}
func (staticDialer) Release(string, string, int) {}
func (staticDialer) Close() error                { return nil }

// serveTLS accepts connections on loopback and completes the server side of the handshake with cert, which
// is all a client's certificate verification sees of a member. Each handshake's outcome is sent on the
// returned channel: nil when the client accepted the member's certificate, else the alert the client sent.
func serveTLS(t *testing.T, cert tls.Certificate, clientCAs *x509.CertPool) (string, <-chan error) {
	t.Helper()
	ln, err := tls.Listen("tcp", "127.0.0.1:0", &tls.Config{Certificates: []tls.Certificate{cert},
		ClientCAs: clientCAs, ClientAuth: tls.RequireAndVerifyClientCert, NextProtos: []string{"h2"}})
	require.NoError(t, err)
	t.Cleanup(func() { _ = ln.Close() })
	outcomes := make(chan error, 100)
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func(c net.Conn) {
				select {
				case outcomes <- c.(*tls.Conn).Handshake():
				default:
				}
				time.Sleep(100 * time.Millisecond)
				_ = c.Close()
			}(c)
		}
	}()
	return ln.Addr().String(), outcomes
}

// A member's certificate is accepted when it chains to the cluster's CA and is valid for one of the member's
// own names, in any of the shapes real clusters mint (cert-manager, kubeadm, hand-written openssl configs),
// and refused otherwise. Every case is a real TLS handshake, with the settings the engine's clients use, to a
// server presenting the certificate as etcd-0 of service etcd-headless in namespace db.
func TestMemberTLSNames(t *testing.T) {
	clusterCA, otherCA := newTestCA(t), newTestCA(t)
	intermediateCA := clusterCA.intermediate(t)
	client := clusterCA.issue(t, x509.ExtKeyUsageClientAuth)
	clientCAs := x509.NewCertPool()
	clientCAs.AddCert(clusterCA.cert)
	roots := x509.NewCertPool()
	roots.AddCert(clusterCA.cert)
	base := &tls.Config{RootCAs: roots, Certificates: []tls.Certificate{client}, MinVersion: tls.VersionTLS12}
	serverAuth := x509.ExtKeyUsageServerAuth

	for _, tc := range []struct {
		name   string
		server tls.Certificate
		// refused is "" when the certificate must be accepted, else text the client's error must contain.
		refused []string
	}{
		{"pod.service", clusterCA.issue(t, serverAuth, "etcd-0.etcd-headless"), nil},
		{"pod.service.namespace", clusterCA.issue(t, serverAuth, "etcd-0.etcd-headless.db"), nil},
		{"pod.service.namespace.svc", clusterCA.issue(t, serverAuth, "etcd-0.etcd-headless.db.svc"), nil},
		{"pod.service.namespace.svc.cluster.local", clusterCA.issue(t, serverAuth, "etcd-0.etcd-headless.db.svc.cluster.local"), nil},
		{"pod.service.namespace.svc.<another cluster domain>", clusterCA.issue(t, serverAuth, "etcd-0.etcd-headless.db.svc.prod.example.org"), nil},
		{"a fully qualified name in capitals", clusterCA.issue(t, serverAuth, "Etcd-0.Etcd-Headless.DB.SVC.Cluster.Local"), nil},
		{"*.service.namespace", clusterCA.issue(t, serverAuth, "*.etcd-headless.db"), nil},
		{"*.service.namespace.svc", clusterCA.issue(t, serverAuth, "*.etcd-headless.db.svc"), nil},
		{"*.service.namespace.svc.cluster.local", clusterCA.issue(t, serverAuth, "*.etcd-headless.db.svc.cluster.local"), nil},
		{"*.service.namespace.svc.<another cluster domain>", clusterCA.issue(t, serverAuth, "*.etcd-headless.db.svc.k8s.internal"), nil},
		{"the member's name among others, IPs included", clusterCA.issueFor(t, serverAuth, []net.IP{net.IPv4(127, 0, 0, 1)},
			"localhost", "etcd-1.etcd-headless.db.svc", "etcd-0.etcd-headless.db.svc.cluster.local"), nil},
		{"a certificate from an intermediate of the cluster CA", intermediateCA.issue(t, serverAuth, "etcd-0.etcd-headless.db.svc"), nil},

		{"a certificate from another CA", otherCA.issue(t, serverAuth, "etcd-0.etcd-headless.db.svc"),
			[]string{"member etcd-0 (client): certificate issued by CN=test-ca key ", " is refused by tls.caFile (trusts another CN=test-ca): unknown authority; if the CA was rotated: widen trust (old+new CA), roll, then swap the leaves"}},
		{"a certificate for another member only", clusterCA.issue(t, serverAuth, "etcd-1.etcd-headless.db.svc", "etcd-1.etcd-headless.db.svc.cluster.local"),
			[]string{"member etcd-0", "for DNS names etcd-1.etcd-headless.db.svc, etcd-1.etcd-headless.db.svc.cluster.local",
				"etcd-0.etcd-headless, etcd-0.etcd-headless.db, etcd-0.etcd-headless.db.svc or etcd-0.etcd-headless.db.svc.<cluster domain>"}},
		{"the member's name under another service", clusterCA.issue(t, serverAuth, "etcd-0.other.db.svc", "*.other.db.svc.cluster.local"),
			[]string{"member etcd-0", "etcd-0.other.db.svc"}},
		{"the member's name in another namespace", clusterCA.issue(t, serverAuth, "etcd-0.etcd-headless.staging.svc.cluster.local"),
			[]string{"member etcd-0"}},
		// The port-forward makes every member answer at 127.0.0.1: a certificate valid for that address (kubeadm
		// puts it in every etcd server certificate) proves nothing about which member answers.
		{"a certificate for 127.0.0.1 and localhost, the address actually dialled",
			clusterCA.issueFor(t, serverAuth, []net.IP{net.IPv4(127, 0, 0, 1)}, "localhost"),
			[]string{"member etcd-0", "DNS names localhost; IP addresses 127.0.0.1"}},
		{"a wildcard one label too wide", clusterCA.issue(t, serverAuth, "*.db.svc", "*.svc.cluster.local"), []string{"member etcd-0"}},
		{"a wildcard in the cluster domain", clusterCA.issue(t, serverAuth, "etcd-0.etcd-headless.db.svc.*"), []string{"member etcd-0"}},
		{"the member's name in the common name only", clusterCA.sign(t, func(c *x509.Certificate) {
			c.Subject.CommonName = "etcd-0.etcd-headless.db.svc"
		}), []string{"member etcd-0", "no DNS name or IP address", "CN=etcd-0.etcd-headless.db.svc"}},
		{"a client-only certificate for the member's name", clusterCA.issue(t, x509.ExtKeyUsageClientAuth, "etcd-0.etcd-headless.db.svc"),
			[]string{"member etcd-0 (client): certificate issued by CN=test-ca key ", "is refused: incompatible key usage"}},
		{"an expired certificate for the member's name", clusterCA.sign(t, func(c *x509.Certificate) {
			c.DNSNames, c.NotBefore, c.NotAfter = []string{"etcd-0.etcd-headless.db.svc"}, time.Now().Add(-2*time.Hour), time.Now().Add(-time.Hour)
		}), []string{"expired"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			addr, outcomes := serveTLS(t, tc.server, clientCAs)
			cfg := memberTLSConfig(base, newMemberIdentity("etcd-0", "etcd-headless", "db"))
			d := tls.Dialer{Config: cfg}
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			conn, err := d.DialContext(ctx, "tcp", addr)
			if err == nil {
				_ = conn.Close()
			}
			var serverSaw error
			select {
			case serverSaw = <-outcomes:
			case <-ctx.Done():
				t.Fatal("the server never finished the handshake")
			}
			if tc.refused == nil {
				require.NoError(t, err, "a valid member certificate is accepted")
				assert.NoError(t, serverSaw)
				return
			}
			require.Error(t, err, "the client went on with a member certificate it must refuse")
			var refused *MemberCertError
			assert.ErrorAs(t, err, &refused, "the refusal comes from the member check, not from somewhere else")
			if refused != nil && strings.Contains(err.Error(), " is refused") {
				assert.LessOrEqual(t, len(refused.Error()), 220, "one line a person reads: %s", refused)
			}
			for _, want := range tc.refused {
				assert.Contains(t, err.Error(), want)
			}
			assert.ErrorContains(t, serverSaw, "bad certificate", "the member is told, as with crypto/tls's own verifier")
		})
	}
	assert.False(t, base.InsecureSkipVerify, "the shared settings are copied, never changed")
	assert.Nil(t, base.VerifyConnection)
}

// The engine reaches members through a local port-forward, so the address it dials (127.0.0.1:port) says
// nothing about who answers: only certificate verification against the cluster's CA and the member's own
// DNS names does. Through the engine's own etcd client (gRPC, with its authority handling), a member whose
// certificate is from another CA, or names another host, must be refused before a single request is sent,
// an operator must hear why, and no setting may turn that off (see tests/e2e/security_tls_faults_test.go).
func TestMemberTLSVerification(t *testing.T) {
	clusterCA, otherCA := newTestCA(t), newTestCA(t)
	client := clusterCA.issue(t, x509.ExtKeyUsageClientAuth)
	clientCAs := x509.NewCertPool()
	clientCAs.AddCert(clusterCA.cert)

	for _, tc := range []struct {
		name    string
		server  tls.Certificate
		refused string // "" = the handshake passes verification
	}{
		{"the member's certificate from the cluster CA", clusterCA.issue(t, x509.ExtKeyUsageServerAuth, "etcd-0.etcd-headless.db.svc"), ""},
		{"a wildcard certificate in another cluster domain", clusterCA.issue(t, x509.ExtKeyUsageServerAuth, "*.etcd-headless.db.svc.prod.example.org"), ""},
		{"a certificate from another CA", otherCA.issue(t, x509.ExtKeyUsageServerAuth, "etcd-0.etcd-headless.db.svc"), "is refused by tls.caFile"},
		{"a certificate for another member name", clusterCA.issue(t, x509.ExtKeyUsageServerAuth, "etcd-1.etcd-headless.db.svc"), "for DNS names etcd-1.etcd-headless.db.svc"},
		{"a certificate for 127.0.0.1 and localhost, the address actually dialled",
			clusterCA.issueFor(t, x509.ExtKeyUsageServerAuth, []net.IP{net.IPv4(127, 0, 0, 1)}, "localhost"), "IP addresses 127.0.0.1"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			addr, outcomes := serveTLS(t, tc.server, clientCAs)
			roots := x509.NewCertPool()
			roots.AddCert(clusterCA.cert)
			m := NewClients(staticDialer{addr}, "db", "etcd-headless", 2379, func(context.Context) (*tls.Config, error) {
				return &tls.Config{RootCAs: roots, Certificates: []tls.Certificate{client}, MinVersion: tls.VersionTLS12}, nil
			})
			defer m.Close()
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
			defer cancel()
			_, err := m.Status(ctx, "etcd-0")
			require.Error(t, err, "the stand-in member speaks no gRPC, so Status fails either way")
			// Status gave up; every connection the client tried is over. Read how each handshake ended.
			var accepted, refusals []string
			for drained := false; !drained; {
				select {
				case err := <-outcomes:
					if err == nil {
						accepted = append(accepted, "accepted")
					} else {
						refusals = append(refusals, err.Error())
					}
				case <-time.After(500 * time.Millisecond):
					drained = true
				}
			}
			require.NotEmpty(t, append(accepted, refusals...), "the client never dialled the member")
			if tc.refused == "" {
				assert.NotContains(t, err.Error(), "certificate was refused")
				assert.NotEmpty(t, accepted, "a valid member certificate is accepted; handshakes: %q", refusals)
				return
			}
			assert.Empty(t, accepted, "the client went on with a member certificate it must refuse")
			assert.Contains(t, strings.Join(refusals, "; "), "bad certificate")
			// and the operator hears why, not just that the member did not answer in time.
			assert.Contains(t, err.Error(), "the member's TLS certificate was refused: member etcd-0 ")
			assert.Contains(t, err.Error(), tc.refused)
			assert.NotContains(t, err.Error(), "the member is down", "a refused certificate is not a member that is down")
		})
	}
}

// Members refused alike share one cause, said without the member: a CA swapped in one step in the Secret the
// engine reads too is refused on every member, and a message per member made a first line of 2,403
// characters (review 3). A certificate valid for another member's names is that member's own refusal.
func TestSharedCauseSaysARefusalOnceForEveryMember(t *testing.T) {
	oldCA, newCA := newTestCA(t), newTestCA(t)
	roots := x509.NewCertPool()
	roots.AddCert(newCA.cert)
	refusal := func(pod string, ca testCA, dns string) *MemberCertError {
		leaf := ca.issueFor(t, x509.ExtKeyUsageServerAuth, nil, dns)
		parsed, err := x509.ParseCertificate(leaf.Certificate[0])
		require.NoError(t, err)
		err = verifyMemberCertificate(newMemberIdentity(pod, "etcd-headless", "db"), roots, nil)(tls.ConnectionState{PeerCertificates: []*x509.Certificate{parsed}})
		var refused *MemberCertError
		require.ErrorAs(t, err, &refused)
		return refused
	}
	zero, two := refusal("etcd-0", oldCA, "etcd-0.etcd-headless.db.svc"), refusal("etcd-2", oldCA, "etcd-2.etcd-headless.db.svc")
	assert.Equal(t, zero.SharedCause(), two.SharedCause(), "the same CA refused on two members reads the same")
	assert.NotContains(t, zero.SharedCause(), "etcd-0")
	assert.Contains(t, zero.SharedCause(), "widen every trust file (old+new CA) and roll, swap the leaves and roll, then drop the old CA")
	assert.LessOrEqual(t, len("rolling db/etcd: rollout blocked: no etcd member answered: etcd-0, etcd-1, etcd-2: "+zero.SharedCause()), 400)

	misnamed := refusal("etcd-1", newCA, "etcd-2.etcd-headless.db.svc")
	assert.Empty(t, misnamed.SharedCause(), "a certificate for another member's names is this member's own problem")
}
