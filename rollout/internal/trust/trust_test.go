package trust

import (
	"crypto/x509"
	"encoding/pem"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/etcd-rollout/pulumi-etcd-rollout/rollout/internal/testpki"
)

// now is when the checks are made: the certificates of testpki are valid from an hour before it.
var now = time.Now().UTC().Truncate(time.Second)

// leafOf mints a peer leaf for member name (its peer host unless o says otherwise), signed by ca.
func leafOf(t *testing.T, ca testpki.Cert, name string, o testpki.Options) *x509.Certificate {
	t.Helper()
	if o.DNS == nil {
		o.DNS = []string{name + ".etcd-headless.db.svc"}
	}
	return ca.Leaf(t, name, o).Cert
}

func TestCheck(t *testing.T) {
	oldCA, newCA := testpki.CA(t, "etcd-peer-ca-2025", nil), testpki.CA(t, "etcd-peer-ca-2026", nil)
	inter := testpki.CA(t, "etcd-peer-intermediate", &newCA)
	oldLeaf := func(name string) *x509.Certificate { return leafOf(t, oldCA, name, testpki.Options{}) }
	newLeaf := func(name string) *x509.Certificate { return leafOf(t, newCA, name, testpki.Options{}) }
	both := []*x509.Certificate{oldCA.Cert, newCA.Cert}
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
		{"the same material", Material{CAs: []*x509.Certificate{oldCA.Cert}, Leaf: oldLeaf("etcd-2")}, peers(Accepted, oldLeaf), nil, ""},
		{"pass 1, widen trust: old+new CA, old leaf", Material{CAs: both, Leaf: oldLeaf("etcd-2")}, peers(Accepted, oldLeaf), nil, ""},
		{"pass 2, swap leaves: peers widened accept the new leaf", Material{CAs: both, Leaf: newLeaf("etcd-2")}, peers(Accepted, oldLeaf), nil, ""},
		{"pass 3, narrow trust once every peer serves a new leaf", Material{CAs: []*x509.Certificate{newCA.Cert}, Leaf: newLeaf("etcd-2")}, peers(Accepted, newLeaf), nil, ""},
		{"a bundle dropped too early: peers still serve old leaves", Material{CAs: []*x509.Certificate{newCA.Cert}, Leaf: newLeaf("etcd-2")},
			peers(Accepted, oldLeaf), []Kind{PeerLeafNotTrusted, PeerLeafNotTrusted}, "signed by an untrusted CA"},
		{"a leaf from a CA its peers do not trust yet (the one-step swap)", Material{CAs: both, Leaf: newLeaf("etcd-2")},
			peers(Refused, oldLeaf), []Kind{LeafNotTrustedByPeer, LeafNotTrustedByPeer}, "bad certificate"},
		{"the one-step swap with the old CA dropped too", Material{CAs: []*x509.Certificate{newCA.Cert}, Leaf: newLeaf("etcd-2")},
			peers(Refused, oldLeaf), []Kind{LeafNotTrustedByPeer, PeerLeafNotTrusted, LeafNotTrustedByPeer, PeerLeafNotTrusted}, ""},
		{"a leaf its own trust file does not hold the CA of", Material{CAs: []*x509.Certificate{oldCA.Cert}, Leaf: newLeaf("etcd-2")},
			peers(Unprobed, oldLeaf), []Kind{OwnLeafUnusable}, "signed by an untrusted CA"},
		{"an expired leaf", Material{CAs: both, Leaf: leafOf(t, oldCA, "etcd-2", testpki.Options{Before: now.Add(-48 * time.Hour), After: now.Add(-time.Hour)})},
			peers(Accepted, oldLeaf), []Kind{OwnLeafUnusable}, "expired " + now.Add(-time.Hour).Format(time.RFC3339)},
		{"a leaf not valid yet", Material{CAs: both, Leaf: leafOf(t, oldCA, "etcd-2", testpki.Options{Before: now.Add(time.Hour), After: now.Add(48 * time.Hour)})},
			peers(Accepted, oldLeaf), []Kind{OwnLeafUnusable}, "not valid before"},
		{"a server-only leaf", Material{CAs: both, Leaf: leafOf(t, oldCA, "etcd-2", testpki.Options{Usages: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}})},
			peers(Accepted, oldLeaf), []Kind{OwnLeafUnusable}, "no client auth usage"},
		{"a leaf without the peer host", Material{CAs: both, Leaf: leafOf(t, oldCA, "etcd-2", testpki.Options{DNS: []string{"etcd-2"}})},
			peers(Accepted, oldLeaf), []Kind{OwnLeafUnusable}, "does not name etcd-2.etcd-headless.db.svc"},
		{"a leaf of an intermediate CA, with its chain", Material{CAs: []*x509.Certificate{newCA.Cert}, Leaf: leafOf(t, inter, "etcd-2", testpki.Options{}), Chain: []*x509.Certificate{inter.Cert}},
			peers(Accepted, func(n string) *x509.Certificate { return newLeaf(n) }), nil, ""},
		{"a leaf of an intermediate CA, without its chain", Material{CAs: []*x509.Certificate{newCA.Cert}, Leaf: leafOf(t, inter, "etcd-2", testpki.Options{})},
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
			"etcd-2 (peer): its new trust (CN=etcd-peer-ca-2026) refuses etcd-0's leaf (issuer CN=etcd-peer-ca-2025: signed by an untrusted CA); keep that CA until every member serves a new leaf"},
		{Refusal{Member: "etcd-2", Side: Peer, Kind: OwnLeafUnusable, Issuer: "CN=etcd-peer-ca-2025", Why: "expired 2026-12-04T11:00:00Z"},
			"etcd-2 (peer): its new certificate (issuer CN=etcd-peer-ca-2025): expired 2026-12-04T11:00:00Z; fix the certificate first"},
		{Refusal{Member: "etcd-2", Side: Client, Kind: PeerLeafNotTrusted, By: "etcd-0", Issuer: "CN=etcd-ca-2025", Trusted: []string{"CN=etcd-ca-2026"}, Why: "signed by an untrusted CA"},
			"etcd-2 (client): its new trust (CN=etcd-ca-2026) refuses etcd-0's leaf (issuer CN=etcd-ca-2025: signed by an untrusted CA); keep that CA until every member and client presents a new leaf"},
		{Refusal{Member: "etcd-2", Side: Client, Kind: EngineCertNotTrusted, Issuer: "CN=etcd-ca-2025", Trusted: []string{"CN=etcd-ca-2026"}, Why: "signed by an untrusted CA"},
			"etcd-2 (client): its new trust (CN=etcd-ca-2026) refuses the engine's certificate (issuer CN=etcd-ca-2025: signed by an untrusted CA); widen trust (old+new CA), roll, then swap client certificates"},
		{Refusal{Member: "etcd-2", Side: Client, Kind: ServerLeafRefusedByEngine, Issuer: "CN=etcd-ca-2026", Why: "signed by an untrusted CA"},
			"etcd-2 (client): the engine would refuse its new server certificate (issuer CN=etcd-ca-2026: signed by an untrusted CA); widen the trust of tls.caFile first, or fix the certificate"},
	}
	for _, tt := range tests {
		assert.Equal(t, tt.want, tt.r.Error())
	}
}

func TestParseMaterial(t *testing.T) {
	ca := testpki.CA(t, "etcd-ca", nil)
	inter := testpki.CA(t, "etcd-intermediate", &ca)
	leaf := leafOf(t, inter, "etcd-0", testpki.Options{})
	pemOf := func(certs ...*x509.Certificate) []byte {
		var out []byte
		for _, c := range certs {
			out = append(out, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: c.Raw})...)
		}
		return out
	}
	m, err := ParseMaterial(pemOf(ca.Cert, inter.Cert), pemOf(leaf, inter.Cert))
	require.NoError(t, err)
	assert.Len(t, m.CAs, 2, "every certificate of the trust file, as etcd loads it")
	assert.Equal(t, leaf.Raw, m.Leaf.Raw)
	assert.Len(t, m.Chain, 1)
	_, err = ParseMaterial([]byte("not PEM"), pemOf(leaf))
	assert.EqualError(t, err, "the trusted-CA file holds no PEM certificate")
	_, err = ParseMaterial(pemOf(ca.Cert), []byte("-----BEGIN EC PRIVATE KEY-----\nAAAA\n-----END EC PRIVATE KEY-----\n"))
	assert.EqualError(t, err, "the certificate file holds no PEM certificate")
}

// An old and a new CA often share a name: the messages tell them apart by their key identifiers.
func TestSameNamedCAsAreToldApart(t *testing.T) {
	oldCA, newCA := testpki.CA(t, "etcd-ca", nil), testpki.CA(t, "etcd-ca", nil)
	refusals := Check(Restart{Member: "etcd-2", PeerHost: "etcd-2.etcd-headless.db.svc", Now: now,
		New:    Material{CAs: []*x509.Certificate{newCA.Cert}, Leaf: leafOf(t, newCA, "etcd-2", testpki.Options{})},
		Others: []Other{{Name: "etcd-0", Verdict: Accepted, Served: []*x509.Certificate{leafOf(t, oldCA, "etcd-0", testpki.Options{})}}}})
	require.Len(t, refusals, 1)
	msg := refusals[0].Error()
	assert.Contains(t, msg, fmt.Sprintf("its new trust (CN=etcd-ca key %x)", newCA.Cert.SubjectKeyId[:4]))
	assert.Contains(t, msg, fmt.Sprintf("(issuer CN=etcd-ca key %x:", oldCA.Cert.SubjectKeyId[:4]))
}
