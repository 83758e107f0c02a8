package rollout

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

// testCA is a throwaway certificate authority for the TLS verification tests.
type testCA struct {
	cert *x509.Certificate
	key  *ecdsa.PrivateKey
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

// issue signs a leaf for dnsNames (server) or a client certificate (no names).
func (ca testCA) issue(t *testing.T, usage x509.ExtKeyUsage, dnsNames ...string) tls.Certificate {
	t.Helper()
	return ca.issueFor(t, usage, nil, dnsNames...)
}

func (ca testCA) issueFor(t *testing.T, usage x509.ExtKeyUsage, ips []net.IP, dnsNames ...string) tls.Certificate {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	require.NoError(t, err)
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(time.Now().UnixNano()), Subject: pkix.Name{CommonName: "leaf"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour), DNSNames: dnsNames, IPAddresses: ips,
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{usage}}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.cert, &key.PublicKey, ca.key)
	require.NoError(t, err)
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key}
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

// The engine reaches members through a local port-forward, so the address it dials (127.0.0.1:port) says
// nothing about who answers: only certificate verification against the cluster's CA and the member's own
// DNS name does. A member whose certificate is from another CA, or names another host, must be refused
// before a single request is sent, and no setting may turn that off (see tests/e2e/security_tls_faults_test.go).
func TestMemberTLSVerification(t *testing.T) {
	const member = "etcd-0.etcd-headless.db.svc"
	clusterCA, otherCA := newTestCA(t), newTestCA(t)
	client := clusterCA.issue(t, x509.ExtKeyUsageClientAuth)
	clientCAs := x509.NewCertPool()
	clientCAs.AddCert(clusterCA.cert)

	for _, tc := range []struct {
		name    string
		server  tls.Certificate
		refused string // "" = the handshake passes verification
	}{
		{"the member's certificate from the cluster CA", clusterCA.issue(t, x509.ExtKeyUsageServerAuth, member), ""},
		{"a certificate from another CA", otherCA.issue(t, x509.ExtKeyUsageServerAuth, member), "bad certificate"},
		{"a certificate for another member name", clusterCA.issue(t, x509.ExtKeyUsageServerAuth, "etcd-0.other.db.svc"), "bad certificate"},
		// The port-forward makes every member answer at 127.0.0.1: a certificate valid for that address (kubeadm
		// puts it in every etcd server certificate) proves nothing about which member answers.
		{"a certificate for 127.0.0.1 and localhost, the address actually dialled",
			clusterCA.issueFor(t, x509.ExtKeyUsageServerAuth, []net.IP{net.IPv4(127, 0, 0, 1)}, "localhost"), "bad certificate"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			addr, outcomes := serveTLS(t, tc.server, clientCAs)
			roots := x509.NewCertPool()
			roots.AddCert(clusterCA.cert)
			m := newMemberClients(staticDialer{addr}, "db", "etcd-headless", 2379, func(context.Context) (*tls.Config, error) {
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
			assert.Contains(t, strings.Join(refusals, "; "), tc.refused)
			// and the operator hears why, not just that the member did not answer in time.
			assert.Contains(t, err.Error(), "the member's TLS certificate was refused")
			assert.Contains(t, err.Error(), "valid for etcd-0.etcd-headless.db.svc")
		})
	}
}
