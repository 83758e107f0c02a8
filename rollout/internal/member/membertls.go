package member

import (
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/asn1"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/etcd-rollout/pulumi-etcd-rollout/rollout/internal/trust"
)

// memberIdentity is who a member is, as its certificate must prove: a pod of the StatefulSet, behind its
// governing Service, in its namespace. The address the engine dials (a port-forward's 127.0.0.1) says
// nothing about who answers, so only these names count.
type memberIdentity struct {
	pod, service, namespace string
}

func newMemberIdentity(pod, service, namespace string) memberIdentity {
	return memberIdentity{pod: strings.ToLower(pod), service: strings.ToLower(service), namespace: strings.ToLower(namespace)}
}

// serverName is the name the engine announces (SNI, gRPC authority). It must be one of the member's own
// names: gRPC would otherwise announce, and put in the tls.Config, the dialled 127.0.0.1.
func (id memberIdentity) serverName() string {
	return id.pod + "." + id.service + "." + id.namespace + ".svc"
}

// fixedNames are the member's stable DNS names that do not depend on the cluster domain, shortest first.
func (id memberIdentity) fixedNames() []string {
	short := id.pod + "." + id.service
	return []string{short, short + "." + id.namespace, id.serverName()}
}

// describeNames lists every name a member's certificate may be valid for, for an operator to read.
func (id memberIdentity) describeNames() string {
	return strings.Join(id.fixedNames(), ", ") + " or " + id.serverName() + ".<cluster domain>" +
		" (or a wildcard in place of " + id.pod + ")"
}

// candidateNames are the names of this member that leaf is checked against, each with the standard x509
// matcher. The fully qualified name ends in the cluster domain, which the engine cannot learn from the API
// (it is a kubelet flag, cluster.local by default, often something else). So a name of the form
// <pod>.<service>.<namespace>.svc.<domain>, or its wildcard *.<service>.<namespace>.svc.<domain>, counts for
// any well-formed domain: the prefix already pins pod, service and namespace, which is what tells members
// apart, and the domain could only tell clusters apart, which the certificate's CA already does — and a CA
// shared between clusters would pass the domain-less <pod>.<service>.<namespace>.svc anyway.
// Only the domain is taken from the certificate; every candidate starts with this member's own labels, so a
// certificate can never make another member's name, an IP address or localhost acceptable.
func (id memberIdentity) candidateNames(leaf *x509.Certificate) []string {
	names := id.fixedNames()
	qualified := id.serverName() + "."
	wildcard := "*." + id.service + "." + id.namespace + ".svc."
	for _, san := range leaf.DNSNames {
		san = strings.ToLower(san)
		for _, prefix := range []string{qualified, wildcard} {
			if domain, ok := strings.CutPrefix(san, prefix); ok && isDNSDomain(domain) {
				names = append(names, qualified+domain)
			}
		}
	}
	return names
}

// isDNSDomain accepts one or more RFC 1123 labels, as a Kubernetes cluster domain must be; it keeps a
// certificate's wildcards or odd characters out of the names built from it.
func isDNSDomain(s string) bool {
	if s == "" || len(s) > 253 {
		return false
	}
	for _, label := range strings.Split(s, ".") {
		if label == "" || len(label) > 63 || label[0] == '-' || label[len(label)-1] == '-' {
			return false
		}
		for _, c := range label {
			if !('a' <= c && c <= 'z' || '0' <= c && c <= '9' || c == '-') {
				return false
			}
		}
	}
	return true
}

// memberTLSConfig returns base (the CA and client certificate from the TLS files) set up to talk to one
// member, and to accept it only if its certificate chains to base's CA and is valid for one of the member's
// names.
//
// The standard verifier checks exactly one host name, ServerName; a member's certificate may carry any of
// several shapes of its name, so the whole check is done in VerifyConnection instead, which is the
// documented crypto/tls way to replace it (see ExampleConfig_verifyConnection in crypto/tls): setting
// InsecureSkipVerify below only hands verification over to VerifyConnection, which crypto/tls runs on every
// handshake, resumptions included, and whose error aborts the handshake. Verification is not made optional
// anywhere: every member connection and the refused-certificate probe are built here, and
// TestMemberTLSNames proves through real handshakes that a certificate from another CA or for another name
// is refused.
func memberTLSConfig(base *tls.Config, id memberIdentity) *tls.Config {
	cfg := base.Clone()
	cfg.ServerName = id.serverName()
	cfg.InsecureSkipVerify = true // not a skip: verifyMemberCertificate does the verification, see above
	cfg.VerifyConnection = verifyMemberCertificate(id, base.RootCAs, base.Time)
	return cfg
}

// verifyMemberCertificate checks what crypto/tls would (chain to roots, for server use, at the current time)
// and then the leaf against each of the member's names. A nil roots means the system pool, as for crypto/tls.
func verifyMemberCertificate(id memberIdentity, roots *x509.CertPool, now func() time.Time) func(tls.ConnectionState) error {
	if now == nil {
		now = time.Now
	}
	return func(cs tls.ConnectionState) error {
		if len(cs.PeerCertificates) == 0 {
			return &MemberCertError{Member: id.pod, accepted: id.describeNames()}
		}
		leaf := cs.PeerCertificates[0]
		refused := &MemberCertError{Member: id.pod, accepted: id.describeNames(), leaf: leaf}
		opts := x509.VerifyOptions{
			Roots:         roots,
			Intermediates: x509.NewCertPool(),
			CurrentTime:   now(),
			KeyUsages:     []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		}
		for _, c := range cs.PeerCertificates[1:] {
			opts.Intermediates.AddCert(c)
		}
		if _, err := leaf.Verify(opts); err != nil {
			refused.chain, refused.trusted = err, subjectsOf(roots)
			return refused
		}
		for _, name := range id.candidateNames(leaf) {
			if leaf.VerifyHostname(name) == nil {
				return nil
			}
		}
		return refused
	}
}

// MemberCertError is why a member's certificate was refused, worded for the operator who has to fix the
// certificate or tls.caFile: which member, what the certificate carries, what it would have needed.
type MemberCertError struct {
	Member   string
	accepted string
	leaf     *x509.Certificate // nil when the member sent no certificate
	chain    error             // set when the certificate does not chain to the CA
	trusted  []string          // the subjects of the CAs in tls.caFile, set with chain
}

// Error is one line. A certificate that does not chain says whose issuer (with its key identifier, as an old
// and a new CA often share a name) against which trusted CAs, and what to do, in about 200 characters: the
// names a certificate carries matter only when they are what is wrong, and every member of a rotated cluster
// refuses alike, so a message per member would repeat them (issue 33: one line of about 6,000 characters).
func (e *MemberCertError) Error() string {
	switch {
	case e.leaf == nil:
		return fmt.Sprintf("member %s presented no TLS certificate", e.Member)
	case errors.As(e.chain, new(x509.UnknownAuthorityError)):
		return fmt.Sprintf("member %s (client): certificate issued by %s is refused by tls.caFile (trusts %s): unknown authority; if the CA was rotated: widen trust (old+new CA), roll, then swap the leaves",
			e.Member, trust.IssuerOf(e.leaf), e.trustedText())
	case e.chain != nil:
		return fmt.Sprintf("member %s (client): certificate issued by %s is refused: %s", e.Member, trust.IssuerOf(e.leaf), chainReason(e.chain))
	default:
		return fmt.Sprintf("member %s presented a TLS certificate for %s, none of which is this member's: it must be valid for %s",
			e.Member, certNames(e.leaf), e.accepted)
	}
}

func (e *MemberCertError) Unwrap() error { return e.chain }

// SharedCause is the refusal without the member, for a message that says it once for every member that met
// it: the certificate's issuer and what tls.caFile trusts, and for a CA swapped in one step, the passes of a
// rotation. It is "" for a refusal of one member's own (a certificate valid for another member's names).
func (e *MemberCertError) SharedCause() string {
	switch {
	case e.leaf == nil:
		return "each presented no TLS certificate"
	case errors.As(e.chain, new(x509.UnknownAuthorityError)):
		return fmt.Sprintf("each serves a certificate issued by %s, which tls.caFile refuses (it trusts %s): a CA swapped in one step; rotate in passes: widen every trust file (old+new CA) and roll, swap the leaves and roll, then drop the old CA",
			trust.IssuerOf(e.leaf), e.trustedText())
	case e.chain != nil:
		return fmt.Sprintf("each serves a certificate issued by %s that is refused: %s", trust.IssuerOf(e.leaf), chainReason(e.chain))
	}
	return ""
}

// reason is the refusal in a few words, for a message that names the member and the certificate itself.
func (e *MemberCertError) reason() string {
	switch {
	case e.leaf == nil:
		return "no certificate"
	case errors.As(e.chain, new(x509.UnknownAuthorityError)):
		return "signed by a CA tls.caFile does not hold"
	case e.chain != nil:
		return chainReason(e.chain)
	}
	return "valid for none of " + e.Member + "'s names"
}

// trustedText names the CAs tls.caFile trusts; one named as the certificate's issuer is "another" CA of that
// name, the mark of a rotation (the pool does not keep the CAs' key identifiers).
func (e *MemberCertError) trustedText() string {
	for _, t := range e.trusted {
		if e.leaf.Issuer.CommonName != "" && t == "CN="+e.leaf.Issuer.CommonName {
			return "another " + t
		}
	}
	return strings.Join(e.trusted, ", ")
}

// chainReason is why x509 refused a chain for another reason than its authority, in a few words.
func chainReason(err error) string {
	var invalid x509.CertificateInvalidError
	switch {
	case errors.As(err, &invalid) && invalid.Reason == x509.Expired:
		return "expired or not yet valid: issue it anew"
	case errors.As(err, &invalid) && invalid.Reason == x509.IncompatibleUsage:
		return "incompatible key usage: a member's certificate must allow server auth"
	}
	return err.Error()
}

// subjectsOf names the CAs of a pool built from tls.caFile by their common names (else whole names); nil
// for the system pool. CertPool.Subjects is deprecated only for the system pool, whose roots it omits.
func subjectsOf(pool *x509.CertPool) []string {
	if pool == nil {
		return []string{"the system's CAs"}
	}
	var out []string
	for _, der := range pool.Subjects() { //nolint:staticcheck // a pool from tls.caFile, not the system pool
		var rdn pkix.RDNSequence
		if _, err := asn1.Unmarshal(der, &rdn); err != nil {
			continue
		}
		var name pkix.Name
		name.FillFromRDNSequence(&rdn)
		if name.CommonName != "" {
			out = append(out, "CN="+name.CommonName)
		} else {
			out = append(out, name.String())
		}
	}
	return out
}

// certNames says which names a certificate is valid for; the subject's common name is mentioned only when
// there is nothing else, because x509 verification ignores it.
func certNames(c *x509.Certificate) string {
	var parts []string
	if len(c.DNSNames) > 0 {
		parts = append(parts, "DNS names "+strings.Join(c.DNSNames, ", "))
	}
	if len(c.IPAddresses) > 0 {
		ips := make([]string, len(c.IPAddresses))
		for i, ip := range c.IPAddresses {
			ips[i] = ip.String()
		}
		parts = append(parts, "IP addresses "+strings.Join(ips, ", "))
	}
	if len(parts) == 0 {
		return fmt.Sprintf("no DNS name or IP address (subject %q, whose common name does not count)", c.Subject.String())
	}
	return strings.Join(parts, "; ")
}
