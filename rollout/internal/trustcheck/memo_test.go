package trustcheck

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/etcd-rollout/pulumi-etcd-rollout/rollout/internal/podfile"
	"github.com/etcd-rollout/pulumi-etcd-rollout/rollout/internal/testpki"
	"github.com/etcd-rollout/pulumi-etcd-rollout/rollout/internal/trust"
)

// A run's checks probe a member once per pod and material: again when its pod is new (a restart loads its
// trust anew) or the material changed, never when the member's pod is not known, and every time without a
// Memo (the revert's fresh look).
func TestAMemoProbesAMemberOncePerPodAndMaterial(t *testing.T) {
	ca := testpki.CA(t, "etcd-ca", nil)
	hosts := []string{"etcd-0.etcd-headless.db.svc", "etcd-1.etcd-headless.db.svc", "etcd-2.etcd-headless.db.svc"}
	leaf, other := ca.Leaf(t, "etcd", testpki.Options{DNS: hosts}), ca.Leaf(t, "etcd", testpki.Options{DNS: hosts})
	template := Template{
		Spec:      &corev1.PodSpec{Volumes: []corev1.Volume{{Name: "tls", VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{SecretName: "etcd-tls"}}}}},
		Container: &corev1.Container{Name: "etcd", VolumeMounts: []corev1.VolumeMount{{Name: "tls", MountPath: "/tls"}}},
		Flags: map[string]string{"peer-trusted-ca-file": "/tls/ca.crt", "peer-cert-file": "/tls/tls.crt", "peer-key-file": "/tls/tls.key",
			"trusted-ca-file": "/tls/ca.crt", "cert-file": "/tls/tls.crt", "key-file": "/tls/tls.key"},
	}
	secret := func(l testpki.Cert) *corev1.Secret {
		return &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "db", Name: "etcd-tls"},
			Data: map[string][]byte{"ca.crt": ca.CertPEM, "tls.crt": l.CertPEM, "tls.key": l.KeyPEM}}
	}
	members := func(uid0, uid1 string) []Member {
		return []Member{{Pod: "etcd-0", PeerURL: "https://" + hosts[0] + ":2380", Reachable: true, UID: uid0},
			{Pod: "etcd-1", PeerURL: "https://" + hosts[1] + ":2380", Reachable: true, UID: uid1},
			{Pod: "etcd-2", PeerURL: "https://" + hosts[2] + ":2380", Reachable: true, UID: "c"}}
	}
	// restarted is ms with etcd-1's container restarted once in its pod: a new process, which may have loaded
	// other trust material (review 3, item 4: the Memo kept the old process's verdict).
	restarted := func(ms []Member) []Member {
		ms[1].Restarts++
		return ms
	}
	tests := []struct {
		name       string
		memo       bool
		second     []Member
		secondLeaf testpki.Cert
		want       int // probes of the second check (a peer probe and a client-port read per other member)
	}{
		{"the same pods and material: answered from the memo", true, members("a", "b"), leaf, 0},
		{"etcd-1 in a new pod: it alone probed again", true, members("a", "b2"), leaf, 2},
		{"etcd-1's container restarted in the same pod: it alone probed again", true, restarted(members("a", "b")), leaf, 2},
		{"new material: every member probed again", true, members("a", "b"), other, 4},
		{"pods not known: never memoized", true, members("", ""), leaf, 4},
		{"no memo: every member probed every time", false, members("a", "b"), leaf, 4},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			served := ca.Leaf(t, "etcd", testpki.Options{DNS: hosts}).Cert
			engine, prober := &fakeEngine{cert: leaf.Cert, served: served}, &fakeProber{verdict: trust.Accepted, served: served}
			var memo *Memo
			if tt.memo {
				memo = NewMemo()
			}
			check := func(l testpki.Cert, ms []Member) Report {
				c := Checker{Files: podfile.NewReader(fake.NewClientset(secret(l)), "db", nil).Memo(), Prober: prober, Engine: engine,
					Probes: memo, ClientPort: 2379, Now: time.Now}
				report, err := c.Check(context.Background(), template, []string{"etcd-2"}, ms)
				require.NoError(t, err)
				assert.Empty(t, report.Refusals)
				return report
			}
			first := members("a", "b")
			if tt.second[0].UID == "" {
				first = tt.second
			}
			assert.Equal(t, 4, check(leaf, first).Probes, "the first check probes every other member, both ports")
			assert.Equal(t, tt.want, check(tt.secondLeaf, tt.second).Probes)
		})
	}
}
