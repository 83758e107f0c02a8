package harness

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"time"

	"github.com/etcd-rollout/pulumi-etcd-rollout/tests/harness/memberapi"
)

// TLSMaterial is the PEM content of an etcd cluster's Secret: one CA, and server, peer and client
// certificates shared by every member (every pod mounts the same Secret, as in the keyspace-etcd-group
// manifests), so the server and peer certificates name every member.
type TLSMaterial struct {
	CA, ServerCert, ServerKey, PeerCert, PeerKey, ClientCert, ClientKey []byte
}

// SecretData is the material under the key names the manifests mount.
func (m TLSMaterial) SecretData() map[string][]byte {
	return map[string][]byte{
		memberapi.SecretCA: m.CA, memberapi.SecretServerCert: m.ServerCert, memberapi.SecretServerKey: m.ServerKey,
		memberapi.SecretPeerCert: m.PeerCert, memberapi.SecretPeerKey: m.PeerKey,
		memberapi.SecretClientCert: m.ClientCert, memberapi.SecretClientKey: m.ClientKey,
	}
}

// ClientConfig is a client-side tls.Config for the cluster: the CA and the client certificate.
func (m TLSMaterial) ClientConfig() (*tls.Config, error) {
	cert, err := tls.X509KeyPair(m.ClientCert, m.ClientKey)
	if err != nil {
		return nil, fmt.Errorf("client certificate: %w", err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(m.CA) {
		return nil, fmt.Errorf("no CA certificate in the TLS material")
	}
	return &tls.Config{Certificates: []tls.Certificate{cert}, RootCAs: pool, MinVersion: tls.VersionTLS12}, nil
}

// MemberDNSNames are the names a member of spec answers to in a real cluster: per pod
// <pod>.<service>.<namespace>.svc (and .cluster.local, and the short forms), plus the wildcard.
func MemberDNSNames(spec EtcdSpec, namespace string) []string {
	var names []string
	for _, pod := range spec.PodNames() {
		names = append(names,
			fmt.Sprintf("%s.%s.%s.svc", pod, spec.ServiceName, namespace),
			fmt.Sprintf("%s.%s.%s.svc.cluster.local", pod, spec.ServiceName, namespace),
			fmt.Sprintf("%s.%s", pod, spec.ServiceName))
	}
	return append(names,
		fmt.Sprintf("*.%s.%s.svc", spec.ServiceName, namespace),
		fmt.Sprintf("*.%s.%s.svc.cluster.local", spec.ServiceName, namespace),
		"localhost")
}

// GenerateTLS creates fresh material for spec in namespace (ECDSA P-256, valid one week). The server and peer
// certificates carry the member DNS names and 127.0.0.1, where the members and port-forwards listen here.
func GenerateTLS(spec EtcdSpec, namespace string) (TLSMaterial, error) {
	now := time.Now().Add(-time.Hour)
	caKey, caCertPEM, caCert, err := newCA("etcd-rollout-test-ca "+namespace+"/"+spec.Name, now)
	if err != nil {
		return TLSMaterial{}, err
	}
	dns, ips := MemberDNSNames(spec, namespace), []net.IP{net.ParseIP("127.0.0.1")}
	both := []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth}
	var m TLSMaterial
	m.CA = caCertPEM
	if m.ServerCert, m.ServerKey, err = issue(caCert, caKey, spec.Name+"-server", dns, ips, both, now); err != nil {
		return m, err
	}
	if m.PeerCert, m.PeerKey, err = issue(caCert, caKey, spec.Name+"-peer", dns, ips, both, now); err != nil {
		return m, err
	}
	m.ClientCert, m.ClientKey, err = issue(caCert, caKey, "etcd-rollout-client", nil, nil,
		[]x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}, now)
	return m, err
}

func newCA(cn string, notBefore time.Time) (*ecdsa.PrivateKey, []byte, *x509.Certificate, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, nil, nil, fmt.Errorf("CA key: %w", err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: serial(), Subject: pkix.Name{CommonName: cn},
		NotBefore: notBefore, NotAfter: notBefore.Add(7 * 24 * time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return nil, nil, nil, fmt.Errorf("CA certificate: %w", err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, nil, nil, fmt.Errorf("parsing CA certificate: %w", err)
	}
	return key, pemBlock("CERTIFICATE", der), cert, nil
}

func issue(ca *x509.Certificate, caKey *ecdsa.PrivateKey, cn string, dns []string, ips []net.IP, usage []x509.ExtKeyUsage, notBefore time.Time) (certPEM, keyPEM []byte, err error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, nil, fmt.Errorf("%s key: %w", cn, err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: serial(), Subject: pkix.Name{CommonName: cn},
		NotBefore: notBefore, NotAfter: ca.NotAfter,
		KeyUsage: x509.KeyUsageDigitalSignature | x509.KeyUsageKeyEncipherment, ExtKeyUsage: usage,
		DNSNames: dns, IPAddresses: ips,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, &key.PublicKey, caKey)
	if err != nil {
		return nil, nil, fmt.Errorf("%s certificate: %w", cn, err)
	}
	keyDER, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		return nil, nil, fmt.Errorf("%s key encoding: %w", cn, err)
	}
	return pemBlock("CERTIFICATE", der), pemBlock("EC PRIVATE KEY", keyDER), nil
}

func serial() *big.Int {
	n, _ := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 62))
	return n
}

func pemBlock(typ string, der []byte) []byte {
	return pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der})
}
