package member

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
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

// SeeTrust reads what pod's listener on port announces. It presents no certificate and sends no data. Like
// ProbePeerTrust, it verifies rather than skips: a first handshake with no roots stops at the member's chain,
// a second one pinned to exactly the leaf just served reads the certificate request. What it learns is shown
// (etcd-rollout status), never acted on.
func (m *Clients) SeeTrust(ctx context.Context, pod string, port int) (TrustSeen, error) {
	ctx, cancel := context.WithTimeout(ctx, peerProbeTimeout)
	defer cancel()
	endpoint, err := m.dialer.Endpoint(ctx, m.namespace, pod, port)
	if err != nil {
		return TrustSeen{}, fmt.Errorf("reaching %s's port %d: %w", pod, port, err)
	}
	// The forward stays open (ServedChain says why).
	served, err := servedChain(ctx, endpoint)
	if err != nil {
		return TrustSeen{}, fmt.Errorf("seeing %s's trust on port %d: %w", pod, port, err)
	}
	pinned := x509.NewCertPool()
	pinned.AddCert(served[0])
	seen, err := seeHandshake(ctx, endpoint, &tls.Config{RootCAs: pinned, ServerName: nameOf(served[0]), MinVersion: tls.VersionTLS12})
	if err != nil && !seen.AsksClientCert {
		// A refusal after the certificate request is the member refusing our empty certificate: expected.
		return TrustSeen{}, fmt.Errorf("seeing %s's trust on port %d: %w", pod, port, err)
	}
	seen.Served = served
	return seen, nil
}

// seeHandshake makes one handshake with cfg, presenting an empty certificate if the member asks for one, and
// records the certificate request.
func seeHandshake(ctx context.Context, endpoint string, cfg *tls.Config) (TrustSeen, error) {
	var seen TrustSeen
	cfg.GetClientCertificate = func(req *tls.CertificateRequestInfo) (*tls.Certificate, error) {
		seen.AsksClientCert, seen.AcceptableCAs = true, req.AcceptableCAs
		return &tls.Certificate{}, nil // none: the member refuses the handshake, which is all we wanted of it
	}
	d := tls.Dialer{Config: cfg}
	conn, err := d.DialContext(ctx, "tcp", endpoint)
	if err == nil {
		_ = conn.Close()
	}
	return seen, err
}

// ServedChain is the certificate chain pod's listener on port serves now (its leaf first), read from one
// handshake that trusts nothing, presents nothing and sends no data.
//
// It leaves the port-forward it went through open, as ProbePeerTrust and SeeTrust do. On the client port it
// is the one the member's etcd client uses, and PortForward.Release would stop it under that client, whose
// next call would fail and rebuild it (a new forward: an API request, a handshake). On the peer port an open
// forward costs its idle listener only: each connection through it opens a stream of its own (an API
// request per probe either way). A forward is replaced when its pod is, and ends with the dialer.
func (m *Clients) ServedChain(ctx context.Context, pod string, port int) ([]*x509.Certificate, error) {
	ctx, cancel := context.WithTimeout(ctx, peerProbeTimeout)
	defer cancel()
	endpoint, err := m.dialer.Endpoint(ctx, m.namespace, pod, port)
	if err != nil {
		return nil, fmt.Errorf("reaching %s's port %d: %w", pod, port, err)
	}
	served, err := servedChain(ctx, endpoint)
	if err != nil {
		return nil, fmt.Errorf("reading the certificate %s serves on port %d: %w", pod, port, err)
	}
	return served, nil
}

// servedChain makes a handshake with no roots: crypto/tls stops at the chain the listener serves, and hands
// it over unverified, before any certificate of ours is asked for.
func servedChain(ctx context.Context, endpoint string) ([]*x509.Certificate, error) {
	_, err := seeHandshake(ctx, endpoint, &tls.Config{RootCAs: x509.NewCertPool(), MinVersion: tls.VersionTLS12})
	var unverified *tls.CertificateVerificationError
	if !errors.As(err, &unverified) || len(unverified.UnverifiedCertificates) == 0 {
		if err == nil {
			err = errors.New("no certificate served")
		}
		return nil, err
	}
	return unverified.UnverifiedCertificates, nil
}
