package member

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"time"
)

// explainTLS finds out why a TLS member did not answer in time. The etcd client retries a refused handshake
// until the deadline and then reports only "context deadline exceeded", which reads like a member that is
// down; an operator with a wrong caFile or a certificate for the wrong names needs to hear that instead. So
// after a timeout the engine makes one TLS handshake of its own to the member, with the same settings, and
// when the certificate is refused, says so.
func (m *Clients) explainTLS(pod string, err error) error {
	if err == nil || !noAnswerInTime(err) {
		return err
	}
	m.tlsMu.Lock()
	base := m.tls
	m.tlsMu.Unlock()
	m.mu.Lock()
	c := m.clients[pod]
	m.mu.Unlock()
	if base == nil || c == nil {
		return err
	}
	// The very settings the member's client uses, so the probe refuses exactly what the client refuses.
	probe := memberTLSConfig(base, m.identity(pod))
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	d := tls.Dialer{NetDialer: &net.Dialer{}, Config: probe}
	conn, herr := d.DialContext(ctx, "tcp", c.endpoint)
	if herr == nil {
		_ = conn.Close()
		return err
	}
	var refused *MemberCertError
	if errors.As(herr, &refused) {
		return &CertRefusedError{Refused: refused, Timeout: err}
	}
	return err
}

// CertRefusedError is a call that timed out because the member's certificate was refused. It says only the
// refusal: the timeout's own explanation ("the member is down, not serving its client port…") would send the
// operator to the wrong place. The timeout stays in the chain for errors.Is.
type CertRefusedError struct {
	Refused *MemberCertError
	Timeout error
}

func (e *CertRefusedError) Error() string {
	return fmt.Sprintf("the member's TLS certificate was refused: %v", e.Refused)
}

func (e *CertRefusedError) Unwrap() error { return e.Timeout }
