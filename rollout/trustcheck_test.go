package rollout

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/etcd-rollout/pulumi-etcd-rollout/rollout/internal/member"
	"github.com/etcd-rollout/pulumi-etcd-rollout/rollout/internal/testpki"
	"github.com/etcd-rollout/pulumi-etcd-rollout/rollout/internal/trust"
)

// probingEtcd is the fake etcd with members whose running peer trust answers every probe with verdict,
// serving served on their peer port.
type probingEtcd struct {
	*fakeEtcd
	verdict trust.Verdict
	served  *x509.Certificate
	probes  int
	// refuseOnceRestarted makes the peers refuse from the first restart of c on, as when the Secret's material
	// changed under a member that had passed the check.
	refuseOnceRestarted *fakeCluster
}

func (p *probingEtcd) ProbePeerTrust(context.Context, string, int, tls.Certificate, *x509.CertPool, string) (member.PeerTrustProbe, error) {
	p.probes++
	verdict := p.verdict
	if c := p.refuseOnceRestarted; c != nil {
		c.mu.Lock()
		if len(c.restarted) > 0 {
			verdict = trust.Refused
		}
		c.mu.Unlock()
	}
	out := member.PeerTrustProbe{Verdict: verdict, Served: []*x509.Certificate{p.served}}
	if verdict == trust.Refused {
		out.Alert = "remote error: tls: bad certificate"
	}
	return out, nil
}

// A restart onto peer material its peers do not trust is refused before anything restarts, in preview and in
// the run, with a first line that says who refuses what and what to do; material they trust rolls (issue 33).
// When the first member to restart leads, the refusal comes before the leader is moved off it: a move for a
// restart that will not happen is a write pause and a term for nothing (tests/faults caught the run doing it).
func TestARestartOntoPeerMaterialItsPeersRefuseIsRefused(t *testing.T) {
	oldCA, newCA := testpki.CA(t, "peer-ca-2025", nil), testpki.CA(t, "peer-ca-2026", nil)
	hosts := []string{"etcd-0.etcd.db.svc", "etcd-1.etcd.db.svc", "etcd-2.etcd.db.svc"}
	served := oldCA.Leaf(t, "etcd", testpki.Options{DNS: hosts})
	newLeaf := newCA.Leaf(t, "etcd", testpki.Options{DNS: hosts})
	tests := []struct {
		name    string
		leader  int
		verdict trust.Verdict
		want    string
	}{
		{"peers that refuse the new leaf", 0, trust.Refused,
			"a restart would cut a member off its peers: etcd-2 (peer): etcd-0 refuses its new certificate (issuer CN=peer-ca-2026 key "},
		{"peers that refuse the new leaf of the first member to restart, which leads", 2, trust.Refused,
			"a restart would cut a member off its peers: etcd-2 (peer): etcd-0 refuses its new certificate (issuer CN=peer-ca-2026 key "},
		{"peers that accept it (their trust widened first)", 0, trust.Accepted, ""},
		{"peers that accept it, the first member to restart leading", 2, trust.Accepted, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := newFakeCluster(t, 3, tt.leader)
			peerTLSTemplate(t, c, append(append([]byte{}, oldCA.CertPEM...), newCA.CertPEM...), newLeaf)
			probing := &probingEtcd{fakeEtcd: c.etcd, verdict: tt.verdict, served: served.Cert}
			e := c.engine(t, func(_ *Config, o *Options) { o.etcd = probing })
			_, _, planErr := e.Plan(context.Background())
			res, err := e.Run(context.Background())
			if tt.want == "" {
				require.NoError(t, planErr)
				require.NoError(t, err)
				assert.Len(t, res.MembersRolled, 3)
				assert.Positive(t, probing.probes)
				return
			}
			require.ErrorIs(t, planErr, ErrPeerTrust, "the preview refuses")
			require.ErrorIs(t, err, ErrPeerTrust)
			assert.False(t, errors.Is(err, ErrBlocked), "not a state to wait out")
			var pt *TrustError
			require.ErrorAs(t, err, &pt)
			assert.Contains(t, pt.Error(), tt.want)
			assert.Empty(t, c.restarted, "nothing restarted")
			assert.Empty(t, c.deletedPods())
			assert.Equal(t, 3, c.partition())
			assert.Zero(t, res.LeaderTransfers, "no leader moved")
			assert.Zero(t, c.etcd.moves, "no MoveLeader call")
		})
	}
}

// Members whose etcd names differ from their pods' (--name from something else) are found in etcd's member
// list by their member ID or peer URL: the trust check probes them all the same (review 3, item 2: it matched
// names alone, probed nobody, and every restart onto material the peers refuse passed).
func TestTheTrustCheckFindsMembersWhoseNamesAreNotTheirPods(t *testing.T) {
	oldCA, newCA := testpki.CA(t, "peer-ca-2025", nil), testpki.CA(t, "peer-ca-2026", nil)
	hosts := []string{"etcd-0.etcd.db.svc", "etcd-1.etcd.db.svc", "etcd-2.etcd.db.svc"}
	for _, tt := range []struct {
		name      string
		answering bool // the members answer the Status RPC: they are found by member ID, else by peer URL
	}{{"found by member ID", true}, {"found by peer URL", false}} {
		t.Run(tt.name, func(t *testing.T) {
			c := newFakeCluster(t, 3, 0)
			c.etcd.namePrefix = "infra-etcd-"
			peerTLSTemplate(t, c, append(append([]byte{}, oldCA.CertPEM...), newCA.CertPEM...), newCA.Leaf(t, "etcd", testpki.Options{DNS: hosts}))
			probing := &probingEtcd{fakeEtcd: c.etcd, verdict: trust.Refused, served: oldCA.Leaf(t, "etcd", testpki.Options{DNS: hosts}).Cert}
			e := c.engine(t, func(_ *Config, o *Options) { o.etcd = probing })
			st, err := e.Observe(context.Background())
			require.NoError(t, err)
			if !tt.answering {
				for i := range st.Members {
					st.Members[i].MemberID = 0
				}
			}
			err = e.CheckTrust(context.Background(), st, []int{2})
			require.ErrorIs(t, err, ErrPeerTrust)
			assert.Contains(t, err.Error(), "etcd-2 (peer): etcd-0 refuses its new certificate")
			assert.Equal(t, 2, probing.probes, "both other members probed")
		})
	}
}

// peerTLSTemplate gives the fake StatefulSet a template whose etcd takes its peer TLS from Secret
// etcd-peer-tls, holding the trust file ca and the leaf.
func peerTLSTemplate(t *testing.T, c *fakeCluster, ca []byte, leaf testpki.Cert) {
	secretTLSTemplate(t, c, "etcd-peer-tls", "/etc/etcd/peer", ca, leaf, "--peer-client-cert-auth",
		"--peer-trusted-ca-file=/etc/etcd/peer/ca.crt", "--peer-cert-file=/etc/etcd/peer/tls.crt", "--peer-key-file=/etc/etcd/peer/tls.key")
}

// clientTLSTemplate gives the fake StatefulSet a template whose etcd serves its clients over TLS from Secret
// etcd-client-tls (trust file ca, server certificate leaf), asking each client for a certificate.
func clientTLSTemplate(t *testing.T, c *fakeCluster, ca []byte, leaf testpki.Cert) {
	secretTLSTemplate(t, c, "etcd-client-tls", "/etc/etcd/tls", ca, leaf, "--client-cert-auth",
		"--trusted-ca-file=/etc/etcd/tls/ca.crt", "--cert-file=/etc/etcd/tls/tls.crt", "--key-file=/etc/etcd/tls/tls.key")
}

// secretTLSTemplate gives the fake StatefulSet a template whose etcd runs with args and mounts Secret secret
// (ca.crt: ca, tls.crt and tls.key: leaf) at dir.
func secretTLSTemplate(t *testing.T, c *fakeCluster, secret, dir string, ca []byte, leaf testpki.Cert, args ...string) {
	t.Helper()
	require.NoError(t, c.kube.Tracker().Add(&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "db", Name: secret},
		Data: map[string][]byte{"ca.crt": ca, "tls.crt": leaf.CertPEM, "tls.key": leaf.KeyPEM}}))
	obj, err := c.kube.Tracker().Get(stsGVR, "db", "etcd")
	require.NoError(t, err)
	sts := obj.(*appsv1.StatefulSet).DeepCopy()
	sts.Spec.Template.Spec = corev1.PodSpec{
		Containers: []corev1.Container{{Name: "etcd", Image: "registry.k8s.io/etcd:3.6.8-0", Args: args,
			VolumeMounts: []corev1.VolumeMount{{Name: "tls", MountPath: dir, ReadOnly: true}}}},
		Volumes: []corev1.Volume{{Name: "tls", VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{SecretName: secret}}}},
	}
	require.NoError(t, c.kube.Tracker().Update(stsGVR, sts, "db"))
}

// A member that failed because its peers refuse the peer material its pod mounts is not reverted by a delete:
// the Secret is not part of the revision, so the pod the controller recreates mounts the same material and
// fails again. The run holds with the partition locked and names the Secret (issue 33, item 3).
func TestARevertOntoPeerMaterialItsPeersRefuseHolds(t *testing.T) {
	ca := testpki.CA(t, "peer-ca", nil)
	leaf := ca.Leaf(t, "etcd", testpki.Options{DNS: []string{"etcd-0.etcd.db.svc", "etcd-1.etcd.db.svc", "etcd-2.etcd.db.svc"}})
	c := newFakeCluster(t, 3, 0)
	peerTLSTemplate(t, c, ca.CertPEM, leaf)
	currentRevision(t, c, oldRev)
	c.etcd.brokenAfterRestart["etcd-2"] = true
	probing := &probingEtcd{fakeEtcd: c.etcd, verdict: trust.Accepted, served: leaf.Cert, refuseOnceRestarted: c}
	_, err := c.engine(t, func(cfg *Config, o *Options) {
		o.etcd = probing
		cfg.ReadyTimeout, cfg.HealthTimeout = time.Second, 500*time.Millisecond
	}).Run(context.Background())

	require.Error(t, err)
	assert.ErrorIs(t, err, ErrPeerTrust)
	assert.Contains(t, err.Error(), "etcd-2 was not reverted: etcd-2 would come back on revision etcd-old with the TLS material that is refused (Secret etcd-peer-tls (key ")
	assert.Empty(t, c.deletedPods(), "no pod deleted: it would mount the same material")
	assert.Equal(t, 3, c.partition())
}

// currentRevision gives the fake cluster the ControllerRevision rev, holding the StatefulSet's pod template as
// the controller stores it.
func currentRevision(t *testing.T, c *fakeCluster, rev string) {
	t.Helper()
	obj, err := c.kube.Tracker().Get(stsGVR, "db", "etcd")
	require.NoError(t, err)
	data, err := json.Marshal(map[string]any{"spec": map[string]any{"template": obj.(*appsv1.StatefulSet).Spec.Template}})
	require.NoError(t, err)
	require.NoError(t, c.kube.Tracker().Add(&appsv1.ControllerRevision{ObjectMeta: metav1.ObjectMeta{Namespace: "db", Name: rev},
		Data: runtime.RawExtension{Raw: data}}))
}

// clientProbingEtcd is probingEtcd with the engine's side of the client ports: its client certificate, its
// verdict on a new server certificate, and the server certificate every member serves now.
type clientProbingEtcd struct {
	*probingEtcd
	engineCert    *x509.Certificate
	engineRefusal string
	clientServed  *x509.Certificate
	handshakes    int
}

func (p *clientProbingEtcd) ClientChain(context.Context) ([]*x509.Certificate, error) {
	return []*x509.Certificate{p.engineCert}, nil
}

func (p *clientProbingEtcd) RefusesServerChain(context.Context, string, []*x509.Certificate) (string, error) {
	return p.engineRefusal, nil
}

func (p *clientProbingEtcd) ServedChain(context.Context, string, int) ([]*x509.Certificate, error) {
	p.handshakes++
	return []*x509.Certificate{p.clientServed}, nil
}

// The client side of a rotation: a restart onto a client trust file that refuses the engine's client
// certificate, or drops the CA the other members' server certificates still come from, or onto a server
// certificate the engine would refuse, is refused before anything moves, in preview and in the run; the
// passes roll (issue 33, item 2).
func TestARestartOntoClientMaterialItsClientsRefuseIsRefused(t *testing.T) {
	oldCA, newCA := testpki.CA(t, "etcd-ca-2025", nil), testpki.CA(t, "etcd-ca-2026", nil)
	hosts := []string{"etcd-0.etcd.db.svc", "etcd-1.etcd.db.svc", "etcd-2.etcd.db.svc"}
	oldLeaf, newLeaf := oldCA.Leaf(t, "etcd", testpki.Options{DNS: hosts}), newCA.Leaf(t, "etcd", testpki.Options{DNS: hosts})
	oldClient, newClient := oldCA.Leaf(t, "etcd-rollout", testpki.Options{}), newCA.Leaf(t, "etcd-rollout", testpki.Options{})
	both := append(append([]byte{}, oldCA.CertPEM...), newCA.CertPEM...)
	tests := []struct {
		name          string
		trustPEM      []byte
		leaf          testpki.Cert
		engine        testpki.Cert
		engineRefusal string
		served        testpki.Cert
		want          string
	}{
		{"pass 1: widen", both, oldLeaf, oldClient, "", oldLeaf, ""},
		{"pass 2: swap the leaves", both, newLeaf, newClient, "", oldLeaf, ""},
		{"pass 3: narrow", newCA.CertPEM, newLeaf, newClient, "", newLeaf, ""},
		{"the one-step swap", newCA.CertPEM, newLeaf, newClient, "", oldLeaf,
			"a restart would cut a member off its clients: etcd-2 (client): its new trust (CN=etcd-ca-2026 key "},
		{"narrowed before the engine's certificate was swapped", newCA.CertPEM, newLeaf, oldClient, "", newLeaf,
			"a restart would cut a member off its clients: etcd-2 (client): its new trust (CN=etcd-ca-2026 key "},
		{"a server certificate the engine would refuse", both, newLeaf, oldClient, "signed by a CA tls.caFile does not hold", oldLeaf,
			"a restart would cut a member off its clients: etcd-2 (client): the engine would refuse its new server certificate"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := newFakeCluster(t, 3, 2)
			clientTLSTemplate(t, c, tt.trustPEM, tt.leaf)
			probing := &clientProbingEtcd{probingEtcd: &probingEtcd{fakeEtcd: c.etcd, verdict: trust.Accepted, served: tt.served.Cert},
				engineCert: tt.engine.Cert, engineRefusal: tt.engineRefusal, clientServed: tt.served.Cert}
			e := c.engine(t, func(_ *Config, o *Options) { o.etcd = probing })
			_, _, planErr := e.Plan(context.Background())
			probing.handshakes, probing.probes = 0, 0 // the preview's are not the run's
			res, err := e.Run(context.Background())
			if tt.want == "" {
				require.NoError(t, planErr)
				require.NoError(t, err)
				assert.Len(t, res.MembersRolled, 3)
				assert.Positive(t, probing.handshakes, "the others' server certificates were read")
				assert.Positive(t, res.TrustChecks.Checks, "the checks are counted in the result")
				assert.Equal(t, probing.handshakes+probing.probes, res.TrustChecks.Probes, "every port probed, counted")
				return
			}
			require.ErrorIs(t, planErr, ErrClientTrust, "the preview refuses")
			require.ErrorIs(t, err, ErrClientTrust)
			assert.NotErrorIs(t, err, ErrPeerTrust, "the peers are not the matter")
			assert.Contains(t, strings.SplitN(err.Error(), "\n", 2)[0], tt.want, "the first line says it")
			assert.Empty(t, c.restarted, "nothing restarted")
			assert.Equal(t, 3, c.partition())
			assert.Zero(t, c.etcd.moves, "no MoveLeader call")
		})
	}
}
