//go:build integration

package engine_test

import (
	"context"
	"crypto/x509"
	"encoding/pem"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/etcd-rollout/pulumi-etcd-rollout/rollout"
	"github.com/etcd-rollout/pulumi-etcd-rollout/tests/harness"
	"github.com/etcd-rollout/pulumi-etcd-rollout/tests/harness/memberapi"
)

// keyspaceTLSFiles are the paths the old Job's keyspace-etcd-group call sites passed: the member's own
// certificate (tls.crt), not a separate client certificate, under the Secret mounted at /var/lib/etcd-tls.
var keyspaceTLSFiles = rollout.TLSFiles{
	CAFile:   memberapi.DefaultTLSDir + "/ca.crt",
	CertFile: memberapi.DefaultTLSDir + "/tls.crt",
	KeyFile:  memberapi.DefaultTLSDir + "/tls.key",
}

// newKeyspaceFixture creates the production keyspace-etcd-group shape (tests/manifests/keyspace-etcd-group-0.yaml:
// StatefulSet keyspace-etcd-group-0, Service keyspace-etcd-group-0-peer, mTLS from Secret
// keyspace-etcd-group-0-cluster-secret mounted at /var/lib/etcd-tls, no readinessProbe) with its server
// and peer certificates minted as certs asks. The harness's Secret carries the member certificate as
// peer.crt; the production Secret calls it tls.crt, so the test adds it under that name too.
func newKeyspaceFixture(t *testing.T, certs harness.CertOptions) *fixture {
	t.Helper()
	spec := harness.EtcdSpec{Name: "keyspace-etcd-group-0", ServiceName: "keyspace-etcd-group-0-peer", TLS: true,
		GracePeriod: 5 * time.Second, Certs: certs}
	f := newFixture(t, spec)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	secrets := f.c.Kube.CoreV1().Secrets(f.etcd.Namespace)
	s, err := secrets.Get(ctx, f.etcd.Spec.SecretName(), metav1.GetOptions{})
	require.NoError(t, err)
	s.Data["tls.crt"], s.Data["tls.key"] = f.etcd.TLS.PeerCert, f.etcd.TLS.PeerKey
	_, err = secrets.Update(ctx, s, metav1.UpdateOptions{})
	require.NoError(t, err)
	return f
}

// keyspaceEngine is the engine as the keyspace call sites configure it: their TLS paths, no cool-down.
func (f *fixture) keyspaceEngine(mutate func(*rollout.Config)) *rollout.Engine {
	return f.engine(func(c *rollout.Config, _ *rollout.Options) {
		files := keyspaceTLSFiles
		c.TLS, c.Cooldown = &files, 0
		if mutate != nil {
			mutate(c)
		}
	})
}

// serverCertNames are the DNS names of the certificate the members serve to clients.
func serverCertNames(t *testing.T, m *harness.TLSMaterial) []string {
	block, _ := pem.Decode(m.ServerCert)
	require.NotNil(t, block, "server certificate PEM")
	cert, err := x509.ParseCertificate(block.Bytes)
	require.NoError(t, err)
	return cert.DNSNames
}

// The keyspace-etcd-group stack rolls whichever of the real-world name shapes its certificates carry: the
// engine accepts a member's certificate when it is valid for any of that member's stable names.
func TestKeyspaceTLSRollsWithEveryCertShape(t *testing.T) {
	t.Parallel()
	for _, shape := range harness.AllCertShapes {
		t.Run(string(shape), func(t *testing.T) {
			t.Parallel() // each shape has its own namespace; they wait on member restarts, not the CPU
			f := newKeyspaceFixture(t, harness.CertOptions{Shape: shape})
			want, err := shape.Names(f.etcd.Spec, f.etcd.Namespace)
			require.NoError(t, err)
			require.ElementsMatch(t, want, serverCertNames(t, f.etcd.TLS), "the members serve a certificate of this shape only")

			rev := f.must.ChangeTemplate(label(0))
			before := f.must.Term()
			res, err := f.keyspaceEngine(nil).Run(runCtx(t))
			require.NoError(t, err)
			t.Logf("result: %s", res.Summary())
			assert.Equal(t, []string{"keyspace-etcd-group-0-2", "keyspace-etcd-group-0-1", "keyspace-etcd-group-0-0"}, res.MembersRolled)
			assert.Zero(t, res.UnplannedElections)
			assert.Equal(t, before+uint64(res.LeaderTransfers), f.must.Term(), "raft term rose only by the transfers")
			f.requireRolledTo(rev)
		})
	}
}

// The same stack with a certificate the engine must not accept: one signed by a CA other than ca.crt, and
// one that names only another member. The run touches nothing (no pod restarted, the StatefulSet not
// written) and its error says that the member's certificate was refused, and why.
func TestKeyspaceTLSRefusesForeignOrOtherMembersCertificate(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name  string
		certs harness.CertOptions
		// want are parts of the error (%s: the namespace): which member, what it presented, why refused.
		want []string
	}{
		{"signed by a foreign CA", harness.CertOptions{Shape: harness.CertShapePodSvc, ForeignCA: true},
			[]string{"member keyspace-etcd-group-0-2 (client): certificate issued by CN=",
				" is refused by tls.caFile (trusts ", "unknown authority; if the CA was rotated: widen trust (old+new CA), roll, then swap the leaves"}},
		{"naming only another member", harness.CertOptions{Shape: harness.CertShapePodSvc, OnlyPod: "keyspace-etcd-group-0-0"},
			[]string{"member keyspace-etcd-group-0-2 presented a TLS certificate for DNS names keyspace-etcd-group-0-0.keyspace-etcd-group-0-peer.%s.svc; ",
				"none of which is this member's"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			f := newKeyspaceFixture(t, tt.certs)
			f.must.ChangeTemplate(label(0))
			genBefore := f.must.StatefulSet().Generation
			_, uidsBefore := f.must.Pods()

			res, err := f.keyspaceEngine(func(c *rollout.Config) { c.ReadyTimeout = 10 * time.Second }).Run(runCtx(t))
			require.Error(t, err, "the engine must refuse this certificate")
			t.Logf("refused: %v", err)
			require.ErrorIs(t, err, rollout.ErrBlocked)
			assert.Contains(t, err.Error(), "the member's TLS certificate was refused")
			for _, want := range tt.want {
				assert.Contains(t, err.Error(), strings.ReplaceAll(want, "%s", f.etcd.Namespace))
			}
			assert.Empty(t, res.MembersRolled)
			assert.Equal(t, genBefore, f.must.StatefulSet().Generation, "the StatefulSet was not written")
			assert.Equal(t, 3, f.must.Partition(), "the partition is locked")
			_, uidsAfter := f.must.Pods()
			assert.Equal(t, uidsBefore, uidsAfter, "no pod restarted")
		})
	}
}
