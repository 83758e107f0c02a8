package trust

import (
	"crypto/sha256"
	"crypto/x509"
	"encoding/hex"
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/etcd-rollout/pulumi-etcd-rollout/rollout/internal/testpki"
)

func TestAnnouncedMatchesTheTrustFilesCAsByName(t *testing.T) {
	oldCA, renamed, sameName := testpki.CA(t, "etcd-peer-ca", nil), testpki.CA(t, "etcd-peer-ca-2026", nil), testpki.CA(t, "etcd-peer-ca", nil)
	fp := func(c *x509.Certificate) string { s := sha256.Sum256(c.Raw); return hex.EncodeToString(s[:]) }
	for _, tc := range []struct {
		name      string
		announced [][]byte
		file      []*x509.Certificate
		want      []AnnouncedCA
	}{
		{"the file holds what the member trusts", [][]byte{oldCA.Cert.RawSubject}, []*x509.Certificate{oldCA.Cert},
			[]AnnouncedCA{{Subject: "CN=etcd-peer-ca", SHA256: []string{fp(oldCA.Cert)}}}},
		{"the member started before the file changed", [][]byte{oldCA.Cert.RawSubject}, []*x509.Certificate{renamed.Cert},
			[]AnnouncedCA{{Subject: "CN=etcd-peer-ca"}}},
		{"a widened member", [][]byte{oldCA.Cert.RawSubject, renamed.Cert.RawSubject}, []*x509.Certificate{oldCA.Cert, renamed.Cert},
			[]AnnouncedCA{{Subject: "CN=etcd-peer-ca", SHA256: []string{fp(oldCA.Cert)}}, {Subject: "CN=etcd-peer-ca-2026", SHA256: []string{fp(renamed.Cert)}}}},
		{"two CAs of one name: both named", [][]byte{oldCA.Cert.RawSubject}, []*x509.Certificate{oldCA.Cert, sameName.Cert},
			[]AnnouncedCA{{Subject: "CN=etcd-peer-ca", SHA256: []string{fp(oldCA.Cert), fp(sameName.Cert)}}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			assert.Equal(t, tc.want, Announced(tc.announced, tc.file))
		})
	}
}
