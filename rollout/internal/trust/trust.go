// Package trust decides, before a member restarts, whether the TLS material its new process will load lets it
// talk to its peers and its clients as they run now (issue 33; ../shared/notes/shapes.md §2). etcd reloads
// its leaf certificates on every handshake but its trusted CAs only when the process starts, so a restart is
// the moment a member starts trusting what its files hold now and presenting what they hold now. A restart
// onto a leaf its peers do not trust, or onto a trust file that no longer holds the CA of a leaf a peer
// serves, leaves the member unable to join: one member down, by our hand, and a revert cannot help (the files
// are not part of the StatefulSet's revision). On the client side (client.go), a restart onto a trust file
// that refuses the clients' certificates, or onto a server certificate they refuse, keeps the member's vote
// but cuts it off its clients, the engine among them.
//
// Check and CheckClient are pure: the caller reads the material (the template's files) and probes the
// members (handshakes to their peer and client ports), and passes what it found as typed values.
package trust

import (
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"strings"
	"time"
)

// Side of a member's TLS: its peer port (member to member, both ways) or its client port.
type Side string

const (
	Peer   Side = "peer"
	Client Side = "client"
)

// Material is one side of a member's TLS files, parsed: the certificates of its trusted-CA file, and its
// certificate file's leaf with the intermediates that follow it.
type Material struct {
	CAs   []*x509.Certificate
	Leaf  *x509.Certificate
	Chain []*x509.Certificate
}

// ParseMaterial parses a trusted-CA file and a certificate file (PEM). Errors name which file, never the
// content.
func ParseMaterial(caPEM, certPEM []byte) (Material, error) {
	cas, err := parseCerts(caPEM)
	if err != nil || len(cas) == 0 {
		return Material{}, errors.New("the trusted-CA file holds no PEM certificate")
	}
	m, err := ParseLeaf(certPEM)
	m.CAs = cas
	return m, err
}

// ParseLeaf parses a certificate file (PEM) alone: the material of a listener that trusts no CA file.
func ParseLeaf(certPEM []byte) (Material, error) {
	chain, err := parseCerts(certPEM)
	if err != nil || len(chain) == 0 {
		return Material{}, errors.New("the certificate file holds no PEM certificate")
	}
	return Material{Leaf: chain[0], Chain: chain[1:]}, nil
}

func parseCerts(b []byte) ([]*x509.Certificate, error) {
	var out []*x509.Certificate
	for {
		var block *pem.Block
		block, b = pem.Decode(b)
		if block == nil {
			return out, nil
		}
		if block.Type != "CERTIFICATE" {
			continue
		}
		c, err := x509.ParseCertificate(block.Bytes)
		if err != nil {
			return nil, err
		}
		out = append(out, c)
	}
}

// Verdict is how a running member's trust answered a handshake that presented the new leaf.
type Verdict string

const (
	// Unprobed: no handshake was made (the member did not answer us); its trust is not known.
	Unprobed Verdict = "unprobed"
	Accepted Verdict = "accepted"
	// Refused: the member ended the handshake with a TLS alert (bad certificate, unknown CA).
	Refused Verdict = "refused"
	// Undecided: the handshake was made but the member gave no verdict: it closed the connection without an
	// alert or an answer, as etcd does when a client certificate does not name the address the connection
	// came from (a port-forward's). Its trust of the new leaf could not be checked: never counted as
	// accepted. The chain it served in the handshake is judged all the same.
	Undecided Verdict = "undecided"
)

// Other is another member as it runs now.
type Other struct {
	Name string
	// Served is the chain its peer port served in the handshake just now (its leaf first); nil when not seen.
	Served []*x509.Certificate
	// Verdict is how its running peer trust answered the new leaf; Alert the TLS alert when Refused.
	Verdict Verdict
	Alert   string
}

// Restart is the restart to judge: the member, the host of its peer URL (what its peers' SAN check and
// dials ask its certificate to name), its new peer material, and every other member.
type Restart struct {
	Member   string
	PeerHost string
	New      Material
	Now      time.Time
	Others   []Other
}

// Check returns every reason the restart would leave the member unable to talk to its peers; none means it
// may restart as far as trust goes. A peer that was not probed, or gave no verdict, adds no reason of its
// verdict: its trust is unknown (the caller says so), and the quorum rules of the restart already count it.
// Whatever chain a peer served is judged against the new trust.
func Check(r Restart) []Refusal {
	var out []Refusal
	out = append(out, r.checkOwn()...)
	for _, o := range r.Others {
		if o.Verdict == Refused {
			out = append(out, Refusal{Member: r.Member, Side: Peer, Kind: LeafNotTrustedByPeer, By: o.Name,
				Issuer: IssuerOf(r.New.Leaf), Why: o.Alert})
		}
		if len(o.Served) == 0 {
			continue
		}
		if why := verifyBoth(o.Served[0], r.New.CAs, o.Served[1:], r.Now, ""); why != "" {
			out = append(out, Refusal{Member: r.Member, Side: Peer, Kind: PeerLeafNotTrusted, By: o.Name,
				Issuer: IssuerOf(o.Served[0]), Trusted: names(r.New.CAs), Why: why})
		}
	}
	return out
}

// checkOwn checks the new leaf on its own: valid now, against its own trust file, with both usages etcd puts a
// peer certificate to, naming the member's peer host.
func (r Restart) checkOwn() []Refusal {
	leaf := r.New.Leaf
	if leaf == nil {
		return []Refusal{{Member: r.Member, Side: Peer, Kind: OwnLeafUnusable, Why: "no certificate"}}
	}
	if why := verifyBoth(leaf, r.New.CAs, r.New.Chain, r.Now, r.PeerHost); why != "" {
		return []Refusal{{Member: r.Member, Side: Peer, Kind: OwnLeafUnusable, Issuer: IssuerOf(leaf), Trusted: names(r.New.CAs), Why: why}}
	}
	return nil
}

// verifyBoth verifies leaf against roots for use as a server and as a client (a peer certificate is both: the
// member dials its peers with it and serves its peer port with it), at now, and, when host is set, that it
// names host. It says why not in a few words, or "".
func verifyBoth(leaf *x509.Certificate, roots, chain []*x509.Certificate, now time.Time, host string) string {
	why := verifyFor(leaf, roots, chain, now, host, x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth)
	if strings.HasSuffix(why, " usage") {
		why += " (a peer certificate needs server and client auth)"
	}
	return why
}

// verifyFor verifies leaf against roots for each of usages in turn, at now, and, when host is set, that it
// names host. It says why not in a few words, or "".
func verifyFor(leaf *x509.Certificate, roots, chain []*x509.Certificate, now time.Time, host string, usages ...x509.ExtKeyUsage) string {
	switch {
	case now.Before(leaf.NotBefore):
		return "not valid before " + leaf.NotBefore.UTC().Format(time.RFC3339)
	case now.After(leaf.NotAfter):
		return "expired " + leaf.NotAfter.UTC().Format(time.RFC3339)
	}
	rootPool, interPool := x509.NewCertPool(), x509.NewCertPool()
	for _, c := range roots {
		rootPool.AddCert(c)
	}
	for _, c := range chain {
		interPool.AddCert(c)
	}
	for _, usage := range usages {
		_, err := leaf.Verify(x509.VerifyOptions{Roots: rootPool, Intermediates: interPool, CurrentTime: now, KeyUsages: []x509.ExtKeyUsage{usage}})
		var unknown x509.UnknownAuthorityError
		var invalid x509.CertificateInvalidError
		switch {
		case err == nil:
		case errors.As(err, &unknown):
			return "signed by an untrusted CA"
		case errors.As(err, &invalid) && invalid.Reason == x509.IncompatibleUsage:
			return "no " + usageName(usage) + " usage"
		default:
			return "does not verify: " + err.Error()
		}
	}
	if host != "" {
		if err := leaf.VerifyHostname(host); err != nil {
			return "does not name " + host
		}
	}
	return ""
}

func usageName(u x509.ExtKeyUsage) string {
	switch u {
	case x509.ExtKeyUsageServerAuth:
		return "server auth"
	case x509.ExtKeyUsageClientAuth:
		return "client auth"
	}
	return "the needed"
}

// issuerOf names a certificate's issuer for a person: its common name (else the whole name) and the first
// bytes of the issuing key's identifier, because an old and a new CA often share a name ("etcd-ca").
func IssuerOf(c *x509.Certificate) string {
	if c == nil {
		return ""
	}
	name := c.Issuer.String()
	if c.Issuer.CommonName != "" {
		name = "CN=" + c.Issuer.CommonName
	}
	return name + keyID(c.AuthorityKeyId)
}

// names are the CAs' subjects, as issuerOf names issuers.
func names(cas []*x509.Certificate) []string {
	out := make([]string, 0, len(cas))
	for _, c := range cas {
		name := c.Subject.String()
		if c.Subject.CommonName != "" {
			name = "CN=" + c.Subject.CommonName
		}
		out = append(out, name+keyID(c.SubjectKeyId))
	}
	return out
}

// keyID is " key 1a2b3c4d", the first four bytes of a key identifier, or "" without one.
func keyID(id []byte) string {
	if len(id) == 0 {
		return ""
	}
	return fmt.Sprintf(" key %x", id[:min(4, len(id))])
}

// Kind is which way the trust breaks.
type Kind string

const (
	// LeafNotTrustedByPeer: a running peer refused the new leaf in a handshake.
	LeafNotTrustedByPeer Kind = "new certificate refused by a peer"
	// PeerLeafNotTrusted: the new trust file would refuse the leaf a peer serves now.
	PeerLeafNotTrusted Kind = "a peer's certificate refused by the new trust"
	// OwnLeafUnusable: the new leaf fails on its own (expired, wrong usage, not signed by its own CAs, wrong names).
	OwnLeafUnusable Kind = "new certificate unusable"
	// EngineCertNotTrusted (client side): the new trust file would refuse the engine's client certificate.
	EngineCertNotTrusted Kind = "the engine's client certificate refused by the new trust"
	// ServerLeafRefusedByEngine (client side): the engine would refuse the new server certificate.
	ServerLeafRefusedByEngine Kind = "new server certificate refused by the engine"
)

// Refusal is one reason a restart would cut the member off its peers.
type Refusal struct {
	Member  string
	Side    Side
	Kind    Kind
	By      string   // the peer on the other end, for the peer kinds
	Issuer  string   // the issuer of the certificate refused
	Trusted []string // the CAs the refusing side trusts, when known
	Why     string
}

// Error is one line of about 200 characters at most: who, which side, whose certificate, its issuer, what is
// trusted, and what to do.
func (f Refusal) Error() string {
	var what, do string
	switch f.Kind {
	case LeafNotTrustedByPeer:
		what = fmt.Sprintf("%s refuses its new certificate (issuer %s: %s)", f.By, f.Issuer, f.Why)
		do = "widen trust first: old+new CA in every peer trust file, roll; then swap the leaves"
	case PeerLeafNotTrusted:
		what = fmt.Sprintf("its new trust (%s) refuses %s's leaf (issuer %s: %s)", strings.Join(f.Trusted, ", "), f.By, f.Issuer, f.Why)
		do = "keep that CA until every member serves a new leaf"
		if f.Side == Client {
			do = "keep that CA until every member and client presents a new leaf"
		}
	case EngineCertNotTrusted:
		what = fmt.Sprintf("its new trust (%s) refuses the engine's certificate (issuer %s: %s)", strings.Join(f.Trusted, ", "), f.Issuer, f.Why)
		do = "widen trust (old+new CA), roll, then swap client certificates"
	case ServerLeafRefusedByEngine:
		what = fmt.Sprintf("the engine would refuse its new server certificate (issuer %s: %s)", f.Issuer, f.Why)
		do = "widen the trust of tls.caFile first, or fix the certificate"
	default:
		what = fmt.Sprintf("its new certificate (issuer %s): %s", f.Issuer, f.Why)
		do = "fix the certificate first"
	}
	return fmt.Sprintf("%s (%s): %s; %s", f.Member, f.Side, what, do)
}
