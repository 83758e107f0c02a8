package member

import (
	"bufio"
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"strings"
	"time"

	"github.com/etcd-rollout/pulumi-etcd-rollout/rollout/internal/trust"
)

// PeerTrustProbe is what one handshake to a member's peer port found: the chain it serves there now, and how
// its running peer trust answered the certificate we presented.
type PeerTrustProbe struct {
	Served  []*x509.Certificate
	Verdict trust.Verdict
	// Alert is the TLS alert the member refused the certificate with; for trust.Undecided, what ended the
	// connection instead of a verdict.
	Alert string
}

// peerProbeTimeout bounds one probe: a handshake and one read through a port-forward.
const peerProbeTimeout = 5 * time.Second

// ProbePeerTrust asks pod's running etcd whether its peer trust (loaded when its process started) accepts
// leaf: a TLS handshake to its peer port presenting leaf, then one HTTP request on the peer mux, because under
// TLS 1.3 a refused client certificate is reported only on the first read. The member's served chain is
// verified against roots for serverName; when roots refuse it (the new trust does not hold its CA, which
// the trust check reports on its own), the probe is made again pinned to exactly the leaf just served, so
// that the member's verdict on ours is still known. Nothing is sent but the request for /version.
func (m *Clients) ProbePeerTrust(ctx context.Context, pod string, peerPort int, leaf tls.Certificate, roots *x509.CertPool, serverName string) (PeerTrustProbe, error) {
	ctx, cancel := context.WithTimeout(ctx, peerProbeTimeout)
	defer cancel()
	endpoint, err := m.dialer.Endpoint(ctx, m.namespace, pod, peerPort)
	if err != nil {
		return PeerTrustProbe{Verdict: trust.Unprobed}, fmt.Errorf("reaching %s's peer port %d: %w", pod, peerPort, err)
	}
	// The forward stays open (ServedChain says why).
	cfg := &tls.Config{Certificates: []tls.Certificate{leaf}, RootCAs: roots, ServerName: serverName, MinVersion: tls.VersionTLS12}
	probe, err := peerHandshake(ctx, endpoint, cfg)
	var unverified *tls.CertificateVerificationError
	if errors.As(err, &unverified) && len(unverified.UnverifiedCertificates) > 0 {
		served := unverified.UnverifiedCertificates
		pinned := x509.NewCertPool()
		pinned.AddCert(served[0])
		cfg.RootCAs, cfg.ServerName = pinned, nameOf(served[0])
		if probe, err = peerHandshake(ctx, endpoint, cfg); err == nil {
			probe.Served = served
		}
	}
	if err != nil {
		return PeerTrustProbe{Verdict: trust.Unprobed}, fmt.Errorf("probing %s's peer trust: %w", pod, err)
	}
	return probe, nil
}

// peerHandshake makes one handshake and one request on endpoint with cfg.
func peerHandshake(ctx context.Context, endpoint string, cfg *tls.Config) (PeerTrustProbe, error) {
	var served []*x509.Certificate
	cfg = cfg.Clone()
	cfg.VerifyConnection = func(cs tls.ConnectionState) error {
		served = cs.PeerCertificates // after the usual verification passed; kept for a refusal within the handshake
		return nil
	}
	d := tls.Dialer{NetDialer: &net.Dialer{}, Config: cfg}
	conn, err := d.DialContext(ctx, "tcp", endpoint)
	if alert, ok := remoteAlert(err); ok {
		return PeerTrustProbe{Served: served, Verdict: trust.Refused, Alert: alert}, nil // TLS 1.2 refuses within the handshake
	}
	if err != nil {
		return PeerTrustProbe{}, err
	}
	defer conn.Close()
	tc := conn.(*tls.Conn)
	probe := PeerTrustProbe{Served: tc.ConnectionState().PeerCertificates}
	if deadline, ok := ctx.Deadline(); ok {
		_ = tc.SetDeadline(deadline)
	}
	if _, err := fmt.Fprintf(tc, "GET /version HTTP/1.1\r\nHost: %s\r\nConnection: close\r\n\r\n", cfg.ServerName); err != nil {
		if alert, ok := remoteAlert(err); ok {
			probe.Verdict, probe.Alert = trust.Refused, alert
			return probe, nil
		}
		return probe, err
	}
	_, err = bufio.NewReader(tc).ReadString('\n')
	if alert, ok := remoteAlert(err); ok {
		probe.Verdict, probe.Alert = trust.Refused, alert
		return probe, nil
	}
	if err != nil {
		// Closed without an alert: etcd's SAN check of a client certificate closes the connection after the
		// handshake when the certificate does not name the address it came from, as through a port-forward.
		// No verdict, but the chain it served is known.
		probe.Verdict, probe.Alert = trust.Undecided, fmt.Sprintf("the peer port closed the connection without answering (%v)", err)
		return probe, nil
	}
	probe.Verdict = trust.Accepted
	return probe, nil
}

// remoteAlert says err is a TLS alert the other side sent, and which.
func remoteAlert(err error) (string, bool) {
	if err == nil {
		return "", false
	}
	msg := err.Error()
	i := strings.Index(msg, "remote error: tls: ")
	if i < 0 {
		return "", false
	}
	return msg[i:], true
}

// nameOf is a name leaf is valid for, to pin a probe to it: its first DNS name, else its first IP.
func nameOf(leaf *x509.Certificate) string {
	switch {
	case len(leaf.DNSNames) > 0:
		return leaf.DNSNames[0]
	case len(leaf.IPAddresses) > 0:
		return leaf.IPAddresses[0].String()
	}
	return leaf.Subject.CommonName
}
