package trust

import (
	"bytes"
	"crypto/sha256"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/asn1"
	"encoding/hex"
	"errors"
)

// AnnouncedCA is one CA a running member accepts certificates from, as its listener names it, matched with
// the CA certificates the template's trust file holds now.
type AnnouncedCA struct {
	// Subject is the CA's name as announced ("CN=etcd-peer-ca,O=example").
	Subject string `json:"subject"`
	// SHA256 are the fingerprints (hex) of the trust file's CAs of that name: none when the file no longer
	// holds it (the member started before a change), two or more when CAs share a name, which a rotation
	// that keeps the CA's name does, and the handshake cannot tell which of them the member trusts.
	SHA256 []string `json:"sha256,omitempty"`
}

// Announced matches the subjects a member announced (DER, as a TLS certificate request carries them) with
// cas, the CA certificates of the trust file the member's pod mounts now.
func Announced(subjects [][]byte, cas []*x509.Certificate) []AnnouncedCA {
	out := make([]AnnouncedCA, 0, len(subjects))
	for _, der := range subjects {
		a := AnnouncedCA{Subject: subjectName(der)}
		for _, ca := range cas {
			if bytes.Equal(ca.RawSubject, der) {
				sum := sha256.Sum256(ca.Raw)
				a.SHA256 = append(a.SHA256, hex.EncodeToString(sum[:]))
			}
		}
		out = append(out, a)
	}
	return out
}

// subjectName is a DER subject in the usual one-line form, or its hex when it does not parse.
func subjectName(der []byte) string {
	var rdn pkix.RDNSequence
	if rest, err := asn1.Unmarshal(der, &rdn); err != nil || len(rest) > 0 {
		return "subject " + hex.EncodeToString(der)
	}
	var name pkix.Name
	name.FillFromRDNSequence(&rdn)
	return name.String()
}

// ParseCAs parses a trusted-CA file (PEM); the error names no content.
func ParseCAs(pemBytes []byte) ([]*x509.Certificate, error) {
	cas, err := parseCerts(pemBytes)
	if err != nil || len(cas) == 0 {
		return nil, errors.New("the trusted-CA file holds no PEM certificate")
	}
	return cas, nil
}
