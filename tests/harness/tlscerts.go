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
	"slices"
	"time"

	"github.com/etcd-rollout/pulumi-etcd-rollout/tests/harness/memberapi"
)

// TLSMaterial is the PEM content of an etcd cluster's Secret: one CA, and server, peer and client
// certificates shared by every member (every pod mounts the same Secret, as in the keyspace-etcd-group
// manifests), so the server and peer certificates name every member.
type TLSMaterial struct {
	CA, ServerCert, ServerKey, PeerCert, PeerKey, ClientCert, ClientKey []byte
	// ForeignCA is the CA that signed the server certificate when it is not CA (CertOptions.ForeignCA).
	// It travels in the Secret under memberapi.SecretForeignCA, which only the harness and the member
	// daemon read, so that they can still check a member whose clients (the engine) must refuse it.
	ForeignCA []byte
	// PeerCA is the CA that signed the peer certificate when the spec keeps it apart (SeparatePeerCA); then
	// PeerSecretData holds it with the peer leaf.
	PeerCA []byte
}

// PeerSecretData is the peer Secret's material (SeparatePeerCA), under the keys cert-manager gives a
// Certificate's Secret.
func (m TLSMaterial) PeerSecretData() map[string][]byte {
	return map[string][]byte{"ca.crt": m.PeerCA, "tls.crt": m.PeerCert, "tls.key": m.PeerKey}
}

// SecretData is the material under the key names the manifests mount.
func (m TLSMaterial) SecretData() map[string][]byte {
	data := map[string][]byte{
		memberapi.SecretCA: m.CA, memberapi.SecretServerCert: m.ServerCert, memberapi.SecretServerKey: m.ServerKey,
		memberapi.SecretPeerCert: m.PeerCert, memberapi.SecretPeerKey: m.PeerKey,
		memberapi.SecretClientCert: m.ClientCert, memberapi.SecretClientKey: m.ClientKey,
	}
	if len(m.ForeignCA) > 0 {
		data[memberapi.SecretForeignCA] = m.ForeignCA
	}
	return data
}

// ClientConfig is a client-side tls.Config for the cluster as its users have it: the CA and the client
// certificate.
func (m TLSMaterial) ClientConfig() (*tls.Config, error) {
	return m.clientConfig(m.CA)
}

// harnessClientConfig also trusts ForeignCA: the harness checks members whatever certificate they serve.
func (m TLSMaterial) harnessClientConfig() (*tls.Config, error) {
	return m.clientConfig(m.CA, m.ForeignCA)
}

func (m TLSMaterial) clientConfig(cas ...[]byte) (*tls.Config, error) {
	cert, err := tls.X509KeyPair(m.ClientCert, m.ClientKey)
	if err != nil {
		return nil, fmt.Errorf("client certificate: %w", err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(m.CA) {
		return nil, fmt.Errorf("no CA certificate in the TLS material")
	}
	for _, ca := range cas[1:] {
		pool.AppendCertsFromPEM(ca)
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

// CertOptions choose how GenerateTLSWith mints the server and peer certificates, for tests of what a client
// must accept and refuse. The zero value is GenerateTLS: every name shape, one CA.
type CertOptions struct {
	// Shape, when set, gives the server and peer certificates the DNS names of this one shape and no other
	// (no localhost). They keep the IP SAN 127.0.0.1, where members, port-forwards and the harness dial
	// here; a client that checks names must not accept it.
	Shape CertShape
	// OnlyPod, when set, makes the server certificate name this pod alone (in Shape, default
	// CertShapePodSvc): every other member then serves the certificate of another member.
	OnlyPod string
	// ForeignCA signs the server certificate with a CA other than the one in ca.crt: a client that trusts
	// ca.crt must refuse every member. Peers keep the cluster CA, so the members still form a cluster.
	ForeignCA bool
}

// GenerateTLS creates fresh material for spec in namespace (ECDSA P-256, valid one week). The server and peer
// certificates carry the member DNS names and 127.0.0.1, where the members and port-forwards listen here.
func GenerateTLS(spec EtcdSpec, namespace string) (TLSMaterial, error) {
	return GenerateTLSWith(spec, namespace, CertOptions{})
}

// GenerateTLSWith creates fresh material for spec in namespace with the certificates o asks for.
func GenerateTLSWith(spec EtcdSpec, namespace string, o CertOptions) (TLSMaterial, error) {
	peerDNS, serverDNS, err := o.dnsNames(spec, namespace)
	if err != nil {
		return TLSMaterial{}, fmt.Errorf("certificates for %s/%s: %w", namespace, spec.Name, err)
	}
	now := time.Now().Add(-time.Hour)
	caKey, caCertPEM, caCert, err := newCA("etcd-rollout-test-ca "+namespace+"/"+spec.Name, now)
	if err != nil {
		return TLSMaterial{}, err
	}
	ips := []net.IP{net.ParseIP("127.0.0.1")}
	both := []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth}
	m := TLSMaterial{CA: caCertPEM}
	serverCA, serverCAKey := caCert, caKey
	if o.ForeignCA {
		if serverCAKey, m.ForeignCA, serverCA, err = newCA("etcd-rollout-foreign-ca "+namespace+"/"+spec.Name, now); err != nil {
			return m, err
		}
	}
	if m.ServerCert, m.ServerKey, err = issue(serverCA, serverCAKey, spec.Name+"-server", serverDNS, ips, both, now); err != nil {
		return m, err
	}
	peerCA, peerCAKey := caCert, caKey
	if spec.SeparatePeerCA {
		if peerCAKey, m.PeerCA, peerCA, err = newCA("etcd-rollout-test-peer-ca "+namespace+"/"+spec.Name, now); err != nil {
			return m, err
		}
	}
	if m.PeerCert, m.PeerKey, err = issue(peerCA, peerCAKey, spec.Name+"-peer", peerDNS, ips, both, now); err != nil {
		return m, err
	}
	m.ClientCert, m.ClientKey, err = issue(caCert, caKey, "etcd-rollout-client", nil, nil,
		[]x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}, now)
	return m, err
}

// dnsNames are the DNS SANs of the peer and the server certificate.
func (o CertOptions) dnsNames(spec EtcdSpec, namespace string) (peer, server []string, err error) {
	if o.Shape == "" && o.OnlyPod == "" {
		all := MemberDNSNames(spec, namespace)
		return all, all, nil
	}
	shape := o.Shape
	if shape == "" {
		shape = CertShapePodSvc
	}
	if peer, err = shape.Names(spec, namespace); err != nil {
		return nil, nil, err
	}
	if o.OnlyPod == "" {
		return peer, peer, nil
	}
	if !slices.Contains(spec.PodNames(), o.OnlyPod) {
		return nil, nil, fmt.Errorf("OnlyPod %q is not a pod of %s (%v)", o.OnlyPod, spec.Name, spec.PodNames())
	}
	server, err = shape.Names(spec, namespace, o.OnlyPod)
	return peer, server, err
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
