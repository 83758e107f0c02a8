// Package testpki mints certificates for the trust check's tests: CAs (root or intermediate) and peer leaves
// with both usages, changed by options where a test needs an expired, server-only or misnamed one. Test
// support only; nothing else imports it.
package testpki

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"sync/atomic"
	"testing"
	"time"
)

// Cert is a certificate with its key, parsed and in PEM.
type Cert struct {
	Cert            *x509.Certificate
	Key             *ecdsa.PrivateKey
	CertPEM, KeyPEM []byte
}

// Options change a certificate from the usual: valid from an hour ago for two hours, server and client auth.
type Options struct {
	Usages        []x509.ExtKeyUsage
	DNS           []string
	Before, After time.Time
}

var serial atomic.Int64

// CA mints a CA named cn, signed by parent, or self-signed when parent is nil.
func CA(t testing.TB, cn string, parent *Cert) Cert {
	t.Helper()
	return mint(t, cn, true, parent, Options{})
}

// Leaf mints a leaf named cn for the DNS names of o, signed by ca.
func (ca Cert) Leaf(t testing.TB, cn string, o Options) Cert {
	t.Helper()
	return mint(t, cn, false, &ca, o)
}

func mint(t testing.TB, cn string, isCA bool, parent *Cert, o Options) Cert {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	if o.Usages == nil {
		o.Usages = []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth}
	}
	if o.Before.IsZero() {
		o.Before, o.After = time.Now().Add(-time.Hour), time.Now().Add(time.Hour)
	}
	tpl := &x509.Certificate{SerialNumber: big.NewInt(serial.Add(1)), Subject: pkix.Name{CommonName: cn},
		NotBefore: o.Before, NotAfter: o.After, DNSNames: o.DNS, ExtKeyUsage: o.Usages, KeyUsage: x509.KeyUsageDigitalSignature}
	if isCA {
		tpl.IsCA, tpl.BasicConstraintsValid, tpl.KeyUsage, tpl.ExtKeyUsage = true, true, x509.KeyUsageCertSign, nil
	}
	signer, signerKey := tpl, key
	if parent != nil {
		signer, signerKey = parent.Cert, parent.Key
	}
	der, err := x509.CreateCertificate(rand.Reader, tpl, signer, &key.PublicKey, signerKey)
	if err != nil {
		t.Fatal(err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	kder, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	return Cert{Cert: cert, Key: key, CertPEM: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
		KeyPEM: pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kder})}
}
