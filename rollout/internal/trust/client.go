package trust

import (
	"crypto/x509"
	"errors"
	"time"
)

// ClientRestart is the client side of a restart: the member's new client-port material (New.CAs from its
// --trusted-ca-file, New.Leaf from its --cert-file), the one client whose certificate the engine knows (its
// own), and the server certificate every other member serves on its client port now. A member whose clients
// it refuses, or who serves a certificate they refuse, keeps its peers and its vote but loses its clients:
// the engine among them, which can then never call it healthy, and a Kubernetes API server with it.
type ClientRestart struct {
	Member string
	New    Material
	// AsksClientCert: the new process will ask every client for a certificate its trust file verifies, which
	// etcd does whenever --trusted-ca-file or --client-cert-auth is set (client/pkg/transport TLSInfo.ServerConfig).
	AsksClientCert bool
	// EngineChain is the certificate chain the engine presents to members' client ports, its leaf first; nil
	// when it presents none.
	EngineChain []*x509.Certificate
	// EngineRefusal is why the engine's own connections would refuse the new server certificate, in a few
	// words ("" when they would accept it): the engine judges a member's names its own way.
	EngineRefusal string
	Now           time.Time
	// Others are the other members; Served is the chain each serves on its client port now (Verdict unused).
	Others []Other
}

// CheckClient returns every reason the restart would cut the member off its clients; none means it may restart
// as far as the client side goes. A member not seen adds no reason.
//
// The others' served certificates are judged only when the new trust file verifies the member's own new
// server certificate, that is when one CA signs the members' server certificates and the clients' ones: a
// trust file that then no longer holds the CA of a certificate another member serves drops that CA while
// clients most likely still present certificates it signed (the pass that narrows came too early). Where
// another CA signs the server certificates, the trust file holds the clients' CAs only and the others'
// certificates say nothing about it.
func CheckClient(r ClientRestart) []Refusal {
	var out []Refusal
	if r.EngineRefusal != "" {
		out = append(out, Refusal{Member: r.Member, Side: Client, Kind: ServerLeafRefusedByEngine, Issuer: IssuerOf(r.New.Leaf), Why: r.EngineRefusal})
	}
	if r.AsksClientCert && len(r.EngineChain) > 0 {
		leaf := r.EngineChain[0]
		if why := verifyFor(leaf, r.New.CAs, r.EngineChain[1:], r.Now, "", x509.ExtKeyUsageClientAuth); why != "" {
			out = append(out, Refusal{Member: r.Member, Side: Client, Kind: EngineCertNotTrusted, Issuer: IssuerOf(leaf),
				Trusted: names(r.New.CAs), Why: why})
		}
	}
	if !r.New.SignsOwnLeaf() {
		return out
	}
	for _, o := range r.Others {
		if len(o.Served) == 0 || signedByOneOf(o.Served[0], r.New.CAs, o.Served[1:]) {
			continue
		}
		out = append(out, Refusal{Member: r.Member, Side: Client, Kind: PeerLeafNotTrusted, By: o.Name,
			Issuer: IssuerOf(o.Served[0]), Trusted: names(r.New.CAs), Why: "signed by an untrusted CA"})
	}
	return out
}

// SignsOwnLeaf says the material's trust file holds the CA of its own leaf: one CA signs the member's
// certificate and what it trusts. Only then do the certificates the other members serve say anything about
// a client-side trust file (CheckClient), so only then are they worth a handshake each.
func (m Material) SignsOwnLeaf() bool {
	return m.Leaf != nil && len(m.CAs) > 0 && signedByOneOf(m.Leaf, m.CAs, m.Chain)
}

// signedByOneOf says leaf chains to one of roots through chain, whatever its usages and dates: whether a
// trust file holds the CA that signed it, not whether the certificate is fit for use, which is its member's
// own matter. Only an unknown authority says no.
func signedByOneOf(leaf *x509.Certificate, roots, chain []*x509.Certificate) bool {
	rootPool, interPool := x509.NewCertPool(), x509.NewCertPool()
	for _, c := range roots {
		rootPool.AddCert(c)
	}
	for _, c := range chain {
		interPool.AddCert(c)
	}
	_, err := leaf.Verify(x509.VerifyOptions{Roots: rootPool, Intermediates: interPool, CurrentTime: leaf.NotBefore,
		KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageAny}})
	return !errors.As(err, new(x509.UnknownAuthorityError))
}
