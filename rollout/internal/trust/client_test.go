package trust

import (
	"crypto/x509"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/etcd-rollout/pulumi-etcd-rollout/rollout/internal/testpki"
)

// The client side of a rotation in passes: the member's new --trusted-ca-file against the engine's client
// certificate and against the server certificates the other members serve now.
func TestCheckClient(t *testing.T) {
	oldCA, newCA := testpki.CA(t, "etcd-ca-2025", nil), testpki.CA(t, "etcd-ca-2026", nil)
	serverCA := testpki.CA(t, "etcd-server-ca", nil)
	oldLeaf := func(name string) *x509.Certificate { return leafOf(t, oldCA, name, testpki.Options{}) }
	newLeaf := func(name string) *x509.Certificate { return leafOf(t, newCA, name, testpki.Options{}) }
	only := func(c testpki.Cert) []*x509.Certificate { return []*x509.Certificate{c.Cert} }
	both := []*x509.Certificate{oldCA.Cert, newCA.Cert}
	inter := testpki.CA(t, "etcd-ca-2026-clients", &newCA)
	oldClient, newClient := oldCA.Leaf(t, "etcd-rollout", testpki.Options{}).Cert, newCA.Leaf(t, "etcd-rollout", testpki.Options{}).Cert
	interClient := []*x509.Certificate{inter.Leaf(t, "etcd-rollout", testpki.Options{}).Cert, inter.Cert}
	serving := func(served func(string) *x509.Certificate) []Other {
		return []Other{{Name: "etcd-0", Served: []*x509.Certificate{served("etcd-0")}}, {Name: "etcd-1", Served: []*x509.Certificate{served("etcd-1")}}}
	}
	tests := []struct {
		name    string
		new     Material
		asks    bool
		engine  []*x509.Certificate
		refusal string // the engine's verdict on the new server certificate
		others  []Other
		want    []Kind
		why     string
	}{
		{"the same material", Material{CAs: only(oldCA), Leaf: oldLeaf("etcd-2")}, true, chainOf(oldClient), "", serving(oldLeaf), nil, ""},
		{"pass 1, widen trust", Material{CAs: both, Leaf: oldLeaf("etcd-2")}, true, chainOf(oldClient), "", serving(oldLeaf), nil, ""},
		{"pass 2, swap the leaves", Material{CAs: both, Leaf: newLeaf("etcd-2")}, true, chainOf(newClient), "", serving(oldLeaf), nil, ""},
		{"pass 3, narrow once every member serves a new leaf", Material{CAs: only(newCA), Leaf: newLeaf("etcd-2")}, true, chainOf(newClient), "", serving(newLeaf), nil, ""},
		{"the one-step swap: the old CA still signs what the others serve", Material{CAs: only(newCA), Leaf: newLeaf("etcd-2")}, true, chainOf(newClient), "",
			serving(oldLeaf), []Kind{PeerLeafNotTrusted, PeerLeafNotTrusted}, "keep that CA until every member and client presents a new leaf"},
		{"narrowed before the engine's client certificate was swapped", Material{CAs: only(newCA), Leaf: newLeaf("etcd-2")}, true, chainOf(oldClient), "",
			serving(newLeaf), []Kind{EngineCertNotTrusted}, "refuses the engine's certificate"},
		{"no client certificate asked for: the engine's is not judged", Material{CAs: only(newCA), Leaf: newLeaf("etcd-2")}, false, chainOf(oldClient), "",
			serving(newLeaf), nil, ""},
		{"an engine without a client certificate", Material{CAs: only(newCA), Leaf: newLeaf("etcd-2")}, true, nil, "", serving(newLeaf), nil, ""},
		{"an engine's client certificate from an intermediate CA, with its chain", Material{CAs: only(newCA), Leaf: newLeaf("etcd-2")}, true, interClient, "",
			serving(newLeaf), nil, ""},
		{"the same without its chain", Material{CAs: only(newCA), Leaf: newLeaf("etcd-2")}, true, interClient[:1], "",
			serving(newLeaf), []Kind{EngineCertNotTrusted}, "signed by an untrusted CA"},
		{"a server certificate the engine would refuse", Material{CAs: both, Leaf: newLeaf("etcd-2")}, true, chainOf(newClient), "signed by an untrusted CA",
			serving(oldLeaf), []Kind{ServerLeafRefusedByEngine}, "the engine would refuse its new server certificate"},
		{"server certificates of another CA than the clients': the others' leaves say nothing", Material{CAs: only(newCA), Leaf: leafOf(t, serverCA, "etcd-2", testpki.Options{})},
			true, chainOf(newClient), "", serving(func(n string) *x509.Certificate { return leafOf(t, serverCA, n, testpki.Options{}) }), nil, ""},
		{"an expired leaf served by another member is its own matter", Material{CAs: only(oldCA), Leaf: oldLeaf("etcd-2")}, true, chainOf(oldClient), "",
			[]Other{{Name: "etcd-0", Served: []*x509.Certificate{leafOf(t, oldCA, "etcd-0", testpki.Options{Before: now.Add(-72 * time.Hour), After: now.Add(-time.Hour)})}}}, nil, ""},
		{"members not seen add nothing", Material{CAs: only(newCA), Leaf: newLeaf("etcd-2")}, true, chainOf(newClient), "", []Other{{Name: "etcd-0"}, {Name: "etcd-1"}}, nil, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := CheckClient(ClientRestart{Member: "etcd-2", New: tt.new, AsksClientCert: tt.asks, EngineChain: tt.engine,
				EngineRefusal: tt.refusal, Now: now, Others: tt.others})
			var kinds []Kind
			for _, r := range got {
				kinds = append(kinds, r.Kind)
				assert.Equal(t, Client, r.Side)
				assert.LessOrEqual(t, len(r.Error()), 240, "one short line: %s", r.Error())
			}
			assert.Equal(t, tt.want, kinds, "%v", got)
			if tt.why != "" {
				require.NotEmpty(t, got)
				assert.Contains(t, got[0].Error(), tt.why)
			}
		})
	}
}

func chainOf(leaf *x509.Certificate) []*x509.Certificate { return []*x509.Certificate{leaf} }
