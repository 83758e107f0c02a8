package rollout

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// memberServerName is the name a member's certificate must be valid for: its stable StatefulSet DNS name,
// whatever address the engine actually dials (a port-forward's 127.0.0.1).
func (m *memberClients) memberServerName(pod string) string {
	return fmt.Sprintf("%s.%s.%s.svc", pod, m.service, m.namespace)
}

// explainTLS finds out why a TLS member did not answer in time. The etcd client retries a refused handshake
// until the deadline and then reports only "context deadline exceeded", which reads like a member that is
// down; an operator with a wrong caFile or a certificate for the wrong names needs to hear that instead. So
// after a timeout the engine makes one TLS handshake of its own to the member, with the same settings, and
// when the certificate is refused, says so.
func (m *memberClients) explainTLS(pod string, err error) error {
	if err == nil || !(errors.Is(err, context.DeadlineExceeded) || status.Code(err) == codes.DeadlineExceeded) {
		return err
	}
	m.mu.Lock()
	cfg, c := m.tls, m.clients[pod]
	m.mu.Unlock()
	if cfg == nil || c == nil {
		return err
	}
	probe := cfg.Clone()
	probe.ServerName = m.memberServerName(pod)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	d := tls.Dialer{NetDialer: &net.Dialer{}, Config: probe}
	conn, herr := d.DialContext(ctx, "tcp", c.endpoint)
	if herr == nil {
		_ = conn.Close()
		return err
	}
	var verify *tls.CertificateVerificationError
	var unknownCA x509.UnknownAuthorityError
	var hostname x509.HostnameError
	if errors.As(herr, &verify) || errors.As(herr, &unknownCA) || errors.As(herr, &hostname) {
		return fmt.Errorf("the member's TLS certificate was refused (it must be signed by the CA in tls.caFile and be valid for %s): %v (%w)",
			probe.ServerName, herr, err)
	}
	return err
}
