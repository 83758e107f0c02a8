package trust

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

var now = time.Date(2026, 12, 4, 12, 0, 0, 0, time.UTC)

// issuer is a CA that signs test certificates.
type issuer struct {
	cert *x509.Certificate
	key  *ecdsa.PrivateKey
}

func makeCA(t *testing.T, cn string, parent *issuer) issuer {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	require.NoError(t, err)
	tpl := &x509.Certificate{SerialNumber: big.NewInt(time.Now().UnixNano()), Subject: pkix.Name{CommonName: cn},
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(24 * time.Hour), IsCA: true, BasicConstraintsValid: true,
		KeyUsage: x509.KeyUsageCertSign}
	signer, signerKey := tpl, key
	if parent != nil {
		signer, signerKey = parent.cert, parent.key
	}
	der, err := x509.CreateCertificate(rand.Reader, tpl, signer, &key.PublicKey, signerKey)
	require.NoError(t, err)
	cert, err := x509.ParseCertificate(der)
	require.NoError(t, err)
	return issuer{cert, key}
}

// leafOpts change a leaf from the usual peer certificate (both usages, the member's peer host, valid now).
type leafOpts struct {
	usages        []x509.ExtKeyUsage
	dns           []string
	before, after time.Time
}

func (ca issuer) leaf(t *testing.T, cn string, o leafOpts) *x509.Certificate {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	require.NoError(t, err)
	if o.usages == nil {
		o.usages = []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth}
	}
	if o.dns == nil {
		o.dns = []string{cn + ".etcd-headless.db.svc"}
	}
	if o.before.IsZero() {
		o.before, o.after = now.Add(-time.Hour), now.Add(time.Hour)
	}
	tpl := &x509.Certificate{SerialNumber: big.NewInt(time.Now().UnixNano()), Subject: pkix.Name{CommonName: cn},
		NotBefore: o.before, NotAfter: o.after, ExtKeyUsage: o.usages, DNSNames: o.dns, KeyUsage: x509.KeyUsageDigitalSignature}
	der, err := x509.CreateCertificate(rand.Reader, tpl, ca.cert, &key.PublicKey, ca.key)
	require.NoError(t, err)
	cert, err := x509.ParseCertificate(der)
	require.NoError(t, err)
	return cert
}

func TestCheck(t *testing.T) {
	oldCA, newCA := makeCA(t, "etcd-peer-ca-2025", nil), makeCA(t, "etcd-peer-ca-2026", nil)
	inter := makeCA(t, "etcd-peer-intermediate", &newCA)
	oldLeaf := func(name string) *x509.Certificate { return oldCA.leaf(t, name, leafOpts{}) }
	newLeaf := func(name string) *x509.Certificate { return newCA.leaf(t, name, leafOpts{}) }
	both := []*x509.Certificate{oldCA.cert, newCA.cert}
	peers := func(verdict Verdict, served func(string) *x509.Certificate) []Other {
		var out []Other
		for _, n := range []string{"etcd-0", "etcd-1"} {
			o := Other{Name: n, Verdict: verdict, Served: []*x509.Certificate{served(n)}}
			if verdict == Refused {
				o.Alert = "remote error: tls: bad certificate"
			}
			out = append(out, o)
		}
		return out
	}
	tests := []struct {
		name   string
		new    Material
		others []Other
		want   []Kind
		why    string
	}{
		{"the same material", Material{CAs: []*x509.Certificate{oldCA.cert}, Leaf: oldLeaf("etcd-2")}, peers(Accepted, oldLeaf), nil, ""},
		{"pass 1, widen trust: old+new CA, old leaf", Material{CAs: both, Leaf: oldLeaf("etcd-2")}, peers(Accepted, oldLeaf), nil, ""},
		{"pass 2, swap leaves: peers widened accept the new leaf", Material{CAs: both, Leaf: newLeaf("etcd-2")}, peers(Accepted, oldLeaf), nil, ""},
		{"pass 3, narrow trust once every peer serves a new leaf", Material{CAs: []*x509.Certificate{newCA.cert}, Leaf: newLeaf("etcd-2")}, peers(Accepted, newLeaf), nil, ""},
		{"a bundle dropped too early: peers still serve old leaves", Material{CAs: []*x509.Certificate{newCA.cert}, Leaf: newLeaf("etcd-2")},
			peers(Accepted, oldLeaf), []Kind{PeerLeafNotTrusted, PeerLeafNotTrusted}, "signed by an untrusted CA"},
		{"a leaf from a CA its peers do not trust yet (the one-step swap)", Material{CAs: both, Leaf: newLeaf("etcd-2")},
			peers(Refused, oldLeaf), []Kind{LeafNotTrustedByPeer, LeafNotTrustedByPeer}, "bad certificate"},
		{"the one-step swap with the old CA dropped too", Material{CAs: []*x509.Certificate{newCA.cert}, Leaf: newLeaf("etcd-2")},
			peers(Refused, oldLeaf), []Kind{LeafNotTrustedByPeer, PeerLeafNotTrusted, LeafNotTrustedByPeer, PeerLeafNotTrusted}, ""},
		{"a leaf its own trust file does not hold the CA of", Material{CAs: []*x509.Certificate{oldCA.cert}, Leaf: newLeaf("etcd-2")},
			peers(Unprobed, oldLeaf), []Kind{OwnLeafUnusable}, "signed by an untrusted CA"},
		{"an expired leaf", Material{CAs: both, Leaf: oldCA.leaf(t, "etcd-2", leafOpts{before: now.Add(-48 * time.Hour), after: now.Add(-time.Hour)})},
			peers(Accepted, oldLeaf), []Kind{OwnLeafUnusable}, "expired 2026-12-04T11:00:00Z"},
		{"a leaf not valid yet", Material{CAs: both, Leaf: oldCA.leaf(t, "etcd-2", leafOpts{before: now.Add(time.Hour), after: now.Add(48 * time.Hour)})},
			peers(Accepted, oldLeaf), []Kind{OwnLeafUnusable}, "not valid before"},
		{"a server-only leaf", Material{CAs: both, Leaf: oldCA.leaf(t, "etcd-2", leafOpts{usages: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}})},
			peers(Accepted, oldLeaf), []Kind{OwnLeafUnusable}, "no client auth usage"},
		{"a leaf without the peer host", Material{CAs: both, Leaf: oldCA.leaf(t, "etcd-2", leafOpts{dns: []string{"etcd-2"}})},
			peers(Accepted, oldLeaf), []Kind{OwnLeafUnusable}, "does not name etcd-2.etcd-headless.db.svc"},
		{"a leaf of an intermediate CA, with its chain", Material{CAs: []*x509.Certificate{newCA.cert}, Leaf: inter.leaf(t, "etcd-2", leafOpts{}), Chain: []*x509.Certificate{inter.cert}},
			peers(Accepted, func(n string) *x509.Certificate { return newLeaf(n) }), nil, ""},
		{"a leaf of an intermediate CA, without its chain", Material{CAs: []*x509.Certificate{newCA.cert}, Leaf: inter.leaf(t, "etcd-2", leafOpts{})},
			peers(Accepted, newLeaf), []Kind{OwnLeafUnusable}, "signed by an untrusted CA"},
		{"peers that did not answer add nothing", Material{CAs: both, Leaf: newLeaf("etcd-2")},
			[]Other{{Name: "etcd-0", Verdict: Unprobed}, {Name: "etcd-1", Verdict: Unprobed}}, nil, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := Check(Restart{Member: "etcd-2", PeerHost: "etcd-2.etcd-headless.db.svc", New: tt.new, Now: now, Others: tt.others})
			var kinds []Kind
			for _, r := range got {
				kinds = append(kinds, r.Kind)
				assert.LessOrEqual(t, len(r.Error()), 220, "one short line: %s", r.Error())
				assert.NotContains(t, r.Error(), "\n")
			}
			assert.Equal(t, tt.want, kinds, "%v", got)
			if tt.why != "" {
				require.NotEmpty(t, got)
				assert.Contains(t, got[0].Error(), tt.why)
			}
		})
	}
}

// The messages say who, which side, whose certificate, its issuer, what is trusted and what to do.
func TestRefusalError(t *testing.T) {
	tests := []struct {
		r    Refusal
		want string
	}{
		{Refusal{Member: "etcd-2", Side: Peer, Kind: LeafNotTrustedByPeer, By: "etcd-0", Issuer: "CN=etcd-peer-ca-2026", Why: "remote error: tls: bad certificate"},
			"etcd-2 (peer): etcd-0 refuses its new certificate (issuer CN=etcd-peer-ca-2026: remote error: tls: bad certificate); widen trust first: old+new CA in every peer trust file, roll; then swap the leaves"},
		{Refusal{Member: "etcd-2", Side: Peer, Kind: PeerLeafNotTrusted, By: "etcd-0", Issuer: "CN=etcd-peer-ca-2025", Trusted: []string{"CN=etcd-peer-ca-2026"}, Why: "signed by an untrusted CA"},
			"etcd-2 (peer): its new trust (CN=etcd-peer-ca-2026) refuses etcd-0's certificate (issuer CN=etcd-peer-ca-2025: signed by an untrusted CA); keep that CA in the trust file until every member serves a new leaf"},
		{Refusal{Member: "etcd-2", Side: Peer, Kind: OwnLeafUnusable, Issuer: "CN=etcd-peer-ca-2025", Why: "expired 2026-12-04T11:00:00Z"},
			"etcd-2 (peer): its new certificate (issuer CN=etcd-peer-ca-2025): expired 2026-12-04T11:00:00Z; fix the certificate first"},
	}
	for _, tt := range tests {
		assert.Equal(t, tt.want, tt.r.Error())
	}
}

func TestParseMaterial(t *testing.T) {
	ca := makeCA(t, "etcd-ca", nil)
	inter := makeCA(t, "etcd-intermediate", &ca)
	leaf := inter.leaf(t, "etcd-0", leafOpts{})
	pemOf := func(certs ...*x509.Certificate) []byte {
		var out []byte
		for _, c := range certs {
			out = append(out, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: c.Raw})...)
		}
		return out
	}
	m, err := ParseMaterial(pemOf(ca.cert, inter.cert), pemOf(leaf, inter.cert))
	require.NoError(t, err)
	assert.Len(t, m.CAs, 2, "every certificate of the trust file, as etcd loads it")
	assert.Equal(t, leaf.Raw, m.Leaf.Raw)
	assert.Len(t, m.Chain, 1)
	_, err = ParseMaterial([]byte("not PEM"), pemOf(leaf))
	assert.EqualError(t, err, "the trusted-CA file holds no PEM certificate")
	_, err = ParseMaterial(pemOf(ca.cert), []byte("-----BEGIN EC PRIVATE KEY-----\nAAAA\n-----END EC PRIVATE KEY-----\n"))
	assert.EqualError(t, err, "the certificate file holds no PEM certificate")
}
