package member

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
)

// ClientChain is the certificate chain the engine presents to members' client ports, its leaf first: nil when
// it talks to them without TLS or presents none. The trust check of a restart asks whether the member's new
// trust file accepts it (issue 33).
func (m *Clients) ClientChain(ctx context.Context) ([]*x509.Certificate, error) {
	base, err := m.tlsBase(ctx)
	if err != nil || base == nil || len(base.Certificates) == 0 {
		return nil, err
	}
	var chain []*x509.Certificate
	for _, der := range base.Certificates[0].Certificate {
		c, err := x509.ParseCertificate(der)
		if err != nil {
			return nil, err
		}
		chain = append(chain, c)
	}
	return chain, nil
}

// RefusesServerChain says in a few words why the engine's connections to pod would refuse chain as the
// certificate pod serves on its client port ("" when they would accept it, and when the engine talks to
// members without TLS): the check every connection makes (verifyMemberCertificate), made before a restart
// puts the chain in service, since a member the engine cannot talk to can never be called healthy.
func (m *Clients) RefusesServerChain(ctx context.Context, pod string, chain []*x509.Certificate) (string, error) {
	base, err := m.tlsBase(ctx)
	if err != nil || base == nil {
		return "", err
	}
	err = verifyMemberCertificate(m.identity(pod), base.RootCAs, base.Time)(tls.ConnectionState{PeerCertificates: chain})
	var refused *MemberCertError
	if errors.As(err, &refused) {
		return refused.reason(), nil
	}
	return "", err
}
