package trustcheck

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/etcd-rollout/pulumi-etcd-rollout/rollout/internal/member"
	"github.com/etcd-rollout/pulumi-etcd-rollout/rollout/internal/podfile"
	"github.com/etcd-rollout/pulumi-etcd-rollout/rollout/internal/testpki"
	"github.com/etcd-rollout/pulumi-etcd-rollout/rollout/internal/trust"
)

// fakeProber answers every probe with verdict and records which pods were probed.
type fakeProber struct {
	verdict trust.Verdict
	served  *x509.Certificate
	probed  []string
}

func (p *fakeProber) ProbePeerTrust(_ context.Context, pod string, port int, _ tls.Certificate, _ *x509.CertPool, host string) (member.PeerTrustProbe, error) {
	p.probed = append(p.probed, fmt.Sprintf("%s@%s:%d", pod, host, port))
	out := member.PeerTrustProbe{Verdict: p.verdict, Served: []*x509.Certificate{p.served}}
	if p.verdict == trust.Refused {
		out.Alert = "remote error: tls: bad certificate"
	}
	return out, nil
}

func TestCheckerCheck(t *testing.T) {
	oldCA, newCA := testpki.CA(t, "peer-ca-old", nil), testpki.CA(t, "peer-ca-new", nil)
	oldPEM, newPEM := oldCA.CertPEM, newCA.CertPEM
	hosts := []string{"etcd-0.etcd-headless.db.svc", "etcd-1.etcd-headless.db.svc", "etcd-2.etcd-headless.db.svc"}
	leaf := newCA.Leaf(t, "etcd", testpki.Options{DNS: hosts})
	newLeaf, newLeafKey := leaf.CertPEM, leaf.KeyPEM
	served := oldCA.Leaf(t, "etcd", testpki.Options{DNS: hosts}).Cert
	secret := func(ca []byte) *corev1.Secret {
		return &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "db", Name: "etcd-peer-tls"},
			Data: map[string][]byte{"ca.crt": ca, "tls.crt": newLeaf, "tls.key": newLeafKey}}
	}
	template := func(volume corev1.VolumeSource) Template {
		return Template{
			Spec:      &corev1.PodSpec{Volumes: []corev1.Volume{{Name: "peer-tls", VolumeSource: volume}}},
			Container: &corev1.Container{Name: "etcd", VolumeMounts: []corev1.VolumeMount{{Name: "peer-tls", MountPath: "/etc/etcd/peer"}}},
			Flags: map[string]string{"peer-trusted-ca-file": "/etc/etcd/peer/ca.crt", "peer-cert-file": "/etc/etcd/peer/tls.crt",
				"peer-key-file": "/etc/etcd/peer/tls.key"},
		}
	}
	fromSecret := template(corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{SecretName: "etcd-peer-tls"}})
	namedPort := template(corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{SecretName: "etcd-peer-tls"}})
	namedPort.Container.Ports = []corev1.ContainerPort{{Name: "client", ContainerPort: 2379}, {Name: "peer", ContainerPort: 12380}}
	members := []Member{{Pod: "etcd-0", PeerURL: "https://" + hosts[0] + ":2380", Reachable: true},
		{Pod: "etcd-1", PeerURL: "https://" + hosts[1] + ":2380", Reachable: false},
		{Pod: "etcd-2", PeerURL: "https://" + hosts[2] + ":2380", Reachable: true}}
	tests := []struct {
		name      string
		template  Template
		secret    *corev1.Secret
		verdict   trust.Verdict
		want      []trust.Kind
		wantErr   string
		wantProbe []string
	}{
		{"no peer TLS: nothing to check", Template{Spec: &corev1.PodSpec{}, Container: &corev1.Container{}, Flags: map[string]string{}},
			nil, trust.Accepted, nil, "", nil},
		{"widened peers accept the new leaf", fromSecret, secret(append(append([]byte{}, oldPEM...), newPEM...)), trust.Accepted, nil, "",
			[]string{"etcd-0@" + hosts[0] + ":2380"}},
		{"probed on the container's peer port", namedPort, secret(append(append([]byte{}, oldPEM...), newPEM...)), trust.Accepted, nil, "",
			[]string{"etcd-0@" + hosts[0] + ":12380"}},
		{"peers that refuse it", fromSecret, secret(append(append([]byte{}, oldPEM...), newPEM...)), trust.Refused,
			[]trust.Kind{trust.LeafNotTrustedByPeer}, "", nil},
		{"a trust file without the CA of the leaves served now", fromSecret, secret(newPEM), trust.Accepted,
			[]trust.Kind{trust.PeerLeafNotTrusted}, "", nil},
		{"no verdict (a DNS-only leaf through a port-forward): the served chain is judged", fromSecret, secret(newPEM), trust.Undecided,
			[]trust.Kind{trust.PeerLeafNotTrusted}, "", nil},
		{"no verdict, and a widened trust file: nothing refused", fromSecret, secret(append(append([]byte{}, oldPEM...), newPEM...)), trust.Undecided,
			nil, "", nil},
		{"a key missing from the Secret", fromSecret, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "db", Name: "etcd-peer-tls"},
			Data: map[string][]byte{"ca.crt": oldPEM, "tls.crt": newLeaf}}, trust.Accepted, nil, `no such key in db/Secret etcd-peer-tls (key "tls.key")`, nil},
		{"material no API object holds", template(corev1.VolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: "/etc/pki"}}), nil, trust.Accepted,
			nil, ErrUnreadable.Error(), nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			kube := fake.NewClientset()
			if tt.secret != nil {
				kube = fake.NewClientset(tt.secret)
			}
			prober := &fakeProber{verdict: tt.verdict, served: served}
			c := Checker{Files: podfile.NewReader(kube, "db", nil).Memo(), Prober: prober, Now: time.Now}
			report, err := c.Check(context.Background(), tt.template, []string{"etcd-2"}, members)
			got := report.Refusals
			if tt.wantErr != "" {
				require.Error(t, err)
				assert.Contains(t, err.Error(), tt.wantErr)
				return
			}
			require.NoError(t, err)
			var kinds []trust.Kind
			for _, r := range got {
				kinds = append(kinds, r.Kind)
				assert.Equal(t, "etcd-2", r.Member)
				assert.Equal(t, "etcd-0", r.By, "the unreachable etcd-1 is not judged, the restarted etcd-2 not against itself")
			}
			assert.Equal(t, tt.want, kinds, "%v", got)
			if tt.verdict == trust.Undecided {
				assert.Equal(t, []string{"etcd-0"}, report.Undecided, "a probe without a verdict is said, never taken for one")
			}
			if tt.wantProbe != nil {
				assert.Equal(t, tt.wantProbe, prober.probed, "every reachable member but the one restarted probed once, at its peer host")
				assert.Equal(t, len(prober.probed), report.Probes, "the probes counted")
			}
		})
	}
}

// fakeEngine is the engine's side of the client ports: its client certificate, and the server certificate
// every member serves now; it records which client ports it read.
type fakeEngine struct {
	cert   *x509.Certificate
	served *x509.Certificate
	read   []string
}

func (f *fakeEngine) ClientChain(context.Context) ([]*x509.Certificate, error) {
	return []*x509.Certificate{f.cert}, nil
}

func (f *fakeEngine) RefusesServerChain(context.Context, string, []*x509.Certificate) (string, error) {
	return "", nil
}

func (f *fakeEngine) ServedChain(_ context.Context, pod string, port int) ([]*x509.Certificate, error) {
	f.read = append(f.read, fmt.Sprintf("%s:%d", pod, port))
	return []*x509.Certificate{f.served}, nil
}

// The client side reads the other reachable members' client ports only when the new trust file signs the
// member's own server certificate (otherwise what they serve says nothing about it), and a peer side whose
// material no API object holds does not keep the client side's refusals back.
func TestCheckerChecksTheClientSide(t *testing.T) {
	oldCA, newCA, serverCA := testpki.CA(t, "etcd-ca-old", nil), testpki.CA(t, "etcd-ca-new", nil), testpki.CA(t, "etcd-server-ca", nil)
	hosts := []string{"etcd-0.etcd-headless.db.svc", "etcd-1.etcd-headless.db.svc", "etcd-2.etcd-headless.db.svc"}
	members := []Member{{Pod: "etcd-0", PeerURL: "https://" + hosts[0] + ":2380", Reachable: true},
		{Pod: "etcd-1", PeerURL: "https://" + hosts[1] + ":2380", Reachable: false},
		{Pod: "etcd-2", PeerURL: "https://" + hosts[2] + ":2380", Reachable: true}}
	client := Template{
		Spec: &corev1.PodSpec{Volumes: []corev1.Volume{{Name: "tls", VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{SecretName: "etcd-tls"}}},
			{Name: "peer", VolumeSource: corev1.VolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: "/etc/pki"}}}}},
		Container: &corev1.Container{Name: "etcd", VolumeMounts: []corev1.VolumeMount{{Name: "tls", MountPath: "/etc/etcd/tls"}, {Name: "peer", MountPath: "/etc/etcd/peer"}}},
		Flags: map[string]string{"trusted-ca-file": "/etc/etcd/tls/ca.crt", "cert-file": "/etc/etcd/tls/tls.crt", "key-file": "/etc/etcd/tls/tls.key",
			"peer-trusted-ca-file": "/etc/etcd/peer/ca.crt", "peer-cert-file": "/etc/etcd/peer/tls.crt", "peer-key-file": "/etc/etcd/peer/tls.key"},
	}
	tests := []struct {
		name     string
		signedBy testpki.Cert
		want     []trust.Kind
		wantRead []string
	}{
		{"one CA for servers and clients: the others' server certificates are read", newCA,
			[]trust.Kind{trust.PeerLeafNotTrusted}, []string{"etcd-0:2379"}},
		{"server certificates from another CA: nothing to read", serverCA, nil, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			leaf := tt.signedBy.Leaf(t, "etcd", testpki.Options{DNS: hosts})
			kube := fake.NewClientset(&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "db", Name: "etcd-tls"},
				Data: map[string][]byte{"ca.crt": newCA.CertPEM, "tls.crt": leaf.CertPEM, "tls.key": leaf.KeyPEM}})
			engine := &fakeEngine{cert: newCA.Leaf(t, "etcd-rollout", testpki.Options{}).Cert, served: oldCA.Leaf(t, "etcd", testpki.Options{DNS: hosts}).Cert}
			c := Checker{Files: podfile.NewReader(kube, "db", nil).Memo(), Prober: &fakeProber{verdict: trust.Accepted}, Engine: engine, ClientPort: 2379, Now: time.Now}
			report, err := c.Check(context.Background(), client, []string{"etcd-2"}, members)
			got := report.Refusals
			require.ErrorIs(t, err, ErrUnreadable, "the peer side is said, not judged")
			var side *SideError
			require.ErrorAs(t, err, &side)
			assert.Equal(t, trust.Peer, side.Side)
			var kinds []trust.Kind
			for _, r := range got {
				kinds = append(kinds, r.Kind)
				assert.Equal(t, trust.Client, r.Side)
			}
			assert.Equal(t, tt.want, kinds, "%v", got)
			assert.Equal(t, tt.wantRead, engine.read)
			assert.Equal(t, len(engine.read), report.Probes, "the client ports read, counted")
		})
	}
}
