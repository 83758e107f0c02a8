package member

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"net"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// Before a restart puts a new server certificate in service, the engine judges it as every one of its
// connections will: its CA in tls.caFile, server auth, one of the member's names.
func TestRefusesServerChainJudgesAsTheConnectionsWill(t *testing.T) {
	oldCA, newCA := newTestCA(t), newTestCA(t)
	client := oldCA.issue(t, x509.ExtKeyUsageClientAuth, "etcd-rollout")
	roots := x509.NewCertPool()
	roots.AddCert(oldCA.cert)
	clients := NewClients(addrDialer{"127.0.0.1:1"}, "db", "etcd-headless", 2379, func(context.Context) (*tls.Config, error) {
		return &tls.Config{RootCAs: roots, Certificates: []tls.Certificate{client}}, nil
	})
	chain := func(c tls.Certificate) []*x509.Certificate {
		leaf, err := x509.ParseCertificate(c.Certificate[0])
		require.NoError(t, err)
		return []*x509.Certificate{leaf}
	}
	tests := []struct {
		name string
		cert tls.Certificate
		want string
	}{
		{"its CA in tls.caFile, its name", oldCA.issue(t, x509.ExtKeyUsageServerAuth, "etcd-2.etcd-headless.db.svc"), ""},
		{"a wildcard with a cluster domain", oldCA.issue(t, x509.ExtKeyUsageServerAuth, "*.etcd-headless.db.svc.cluster.local"), ""},
		{"a CA tls.caFile does not hold", newCA.issue(t, x509.ExtKeyUsageServerAuth, "etcd-2.etcd-headless.db.svc"), "signed by a CA tls.caFile does not hold"},
		{"another member's name", oldCA.issue(t, x509.ExtKeyUsageServerAuth, "etcd-1.etcd-headless.db.svc"), "valid for none of etcd-2's names"},
		{"client auth only", oldCA.issue(t, x509.ExtKeyUsageClientAuth, "etcd-2.etcd-headless.db.svc"), "incompatible key usage"},
		{"expired", oldCA.sign(t, func(c *x509.Certificate) {
			c.DNSNames, c.NotAfter = []string{"etcd-2.etcd-headless.db.svc"}, time.Now().Add(-time.Minute)
		}), "expired"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			why, err := clients.RefusesServerChain(context.Background(), "etcd-2", chain(tt.cert))
			require.NoError(t, err)
			if tt.want == "" {
				assert.Empty(t, why)
			} else {
				assert.Contains(t, why, tt.want)
			}
		})
	}
	got, err := clients.ClientChain(context.Background())
	require.NoError(t, err)
	require.Len(t, got, 1)
	assert.Equal(t, client.Certificate[0], got[0].Raw, "the certificate the engine presents")

	plain := NewClients(addrDialer{"127.0.0.1:1"}, "db", "etcd-headless", 2379, nil)
	why, err := plain.RefusesServerChain(context.Background(), "etcd-2", chain(tests[2].cert))
	require.NoError(t, err)
	assert.Empty(t, why, "an engine without TLS judges nothing")
	got, err = plain.ClientChain(context.Background())
	require.NoError(t, err)
	assert.Nil(t, got)
}

// ServedChain reads the chain a listener serves without trusting or presenting anything.
func TestServedChainReadsWhatAListenerServes(t *testing.T) {
	ca := newTestCA(t)
	served := ca.issueFor(t, x509.ExtKeyUsageServerAuth, []net.IP{net.ParseIP("127.0.0.1")}, "etcd-0.etcd-headless.db.svc")
	addr := servePeer(t, served, x509.NewCertPool(), tls.VersionTLS13)
	got, err := NewClients(addrDialer{addr}, "db", "etcd-headless", 2379, nil).ServedChain(context.Background(), "etcd-0", 2379)
	require.NoError(t, err)
	require.NotEmpty(t, got)
	assert.Equal(t, served.Certificate[0], got[0].Raw)
}

// releasingDialer is addrDialer that records every Release.
type releasingDialer struct {
	addrDialer
	released []string
}

func (d *releasingDialer) Release(_, pod string, port int) {
	d.released = append(d.released, fmt.Sprintf("%s:%d", pod, port))
}

// The trust check's and the status's looks at a member's ports leave the port-forwards open: on the client
// port it is the one the member's etcd client goes through (PortForward.Release stops it, and the client's
// next call would fail and rebuild it), and on the peer port the run's next probe takes it; the dialer's
// Close ends them with the engine.
func TestLooksAtAMembersPortsLeaveItsForwardsOpen(t *testing.T) {
	ca := newTestCA(t)
	served := ca.issueFor(t, x509.ExtKeyUsageServerAuth, []net.IP{net.ParseIP("127.0.0.1")}, "etcd-0.etcd-headless.db.svc")
	pool := x509.NewCertPool()
	pool.AddCert(ca.cert)
	addr := servePeer(t, served, pool, tls.VersionTLS13)
	leaf := ca.sign(t, func(c *x509.Certificate) {
		c.DNSNames = []string{"etcd-2.etcd-headless.db.svc"}
		c.ExtKeyUsage = []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth}
	})
	tests := []struct {
		name string
		look func(*Clients) error
	}{
		{"the served chain of the client port", func(c *Clients) error {
			_, err := c.ServedChain(context.Background(), "etcd-0", 2379)
			return err
		}},
		{"a peer trust probe", func(c *Clients) error {
			_, err := c.ProbePeerTrust(context.Background(), "etcd-0", 2380, leaf, pool, "etcd-0.etcd-headless.db.svc")
			return err
		}},
		{"the status's look at the trust", func(c *Clients) error {
			_, err := c.SeeTrust(context.Background(), "etcd-0", 2379)
			return err
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d := &releasingDialer{addrDialer: addrDialer{addr}}
			require.NoError(t, tt.look(NewClients(d, "db", "etcd-headless", 2379, nil)))
			assert.Empty(t, d.released)
		})
	}
}
