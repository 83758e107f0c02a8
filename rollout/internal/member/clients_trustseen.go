package member

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
)

// TrustSeen is what one of a member's TLS listeners shows of the trust its etcd process started with: etcd
// loads its trusted CAs only at start (its leaf on every handshake), and a listener that asks for client
// certificates names the subjects of those CAs in its certificate request. Served is the chain it serves.
type TrustSeen struct {
	// AcceptableCAs are the raw (DER) subjects of the CAs the process accepts client certificates from, as
	// it announces them; AsksClientCert is false for a listener that asks for none.
	AcceptableCAs  [][]byte
	AsksClientCert bool
	Served         []*x509.Certificate
}

// SeeTrust makes one TLS handshake with pod's port and records what the member announces. It presents no
// certificate and sends no data: it learns only what any client is told. It does not verify the member's
// chain, since nothing it learns is trusted, only shown (etcd-rollout status); every call that acts on a
// member goes through the verified clients.
func (m *Clients) SeeTrust(ctx context.Context, pod string, port int) (TrustSeen, error) {
	ctx, cancel := context.WithTimeout(ctx, peerProbeTimeout)
	defer cancel()
	endpoint, err := m.dialer.Endpoint(ctx, m.namespace, pod, port)
	if err != nil {
		return TrustSeen{}, fmt.Errorf("reaching %s's port %d: %w", pod, port, err)
	}
	defer m.dialer.Release(m.namespace, pod, port)
	var seen TrustSeen
	cfg := &tls.Config{
		InsecureSkipVerify: true, // shown, never trusted: see the doc comment
		MinVersion:         tls.VersionTLS12,
		VerifyConnection: func(cs tls.ConnectionState) error {
			seen.Served = cs.PeerCertificates
			return nil
		},
		GetClientCertificate: func(req *tls.CertificateRequestInfo) (*tls.Certificate, error) {
			seen.AsksClientCert, seen.AcceptableCAs = true, req.AcceptableCAs
			return &tls.Certificate{}, nil // none: the member refuses the handshake, which is all we wanted of it
		},
	}
	d := tls.Dialer{Config: cfg}
	conn, err := d.DialContext(ctx, "tcp", endpoint)
	if err == nil {
		_ = conn.Close()
	}
	if len(seen.Served) == 0 {
		if err == nil {
			err = fmt.Errorf("no certificate served")
		}
		return TrustSeen{}, fmt.Errorf("seeing %s's trust on port %d: %w", pod, port, err)
	}
	return seen, nil
}
