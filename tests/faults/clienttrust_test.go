//go:build faults

package faults_test

import (
	"context"
	"errors"
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

// The client CA is rotated on the local cluster, the peer CA kept apart and unchanged (issue 33, item 2,
// client side). Trust is widened and the members' server certificates swapped, each pass a roll; then the
// narrowing pass comes too early, while the engine's client certificate (a client like any other: a
// Kubernetes API server's would be refused alike) is still the old CA's. Restarting a member onto that trust
// file would keep its vote but cut it off the engine, which could then never call it healthy: the run
// refuses before anything moves, with the leader on the first member to restart. Once the client certificate
// is swapped too, the narrowing pass rolls, with 0 unplanned elections.
func TestAClientCARotationRefusesNarrowingBeforeTheClientsAreSwapped(t *testing.T) {
	t.Parallel()
	spec := harness.EtcdSpec{Name: "etcd", ServiceName: "etcd-headless", TLS: true, SeparatePeerCA: true, GracePeriod: 5 * time.Second}
	f := newFixtureOf(t, spec)
	ctx := runCtx(t)
	old := *f.etcd.TLS
	full, err := spec.WithDefaults()
	require.NoError(t, err)
	next, err := harness.GenerateTLS(full, f.etcd.Namespace) // its CA, server and client certificates are used
	require.NoError(t, err)
	both := append(append([]byte{}, old.CA...), next.CA...)
	// setClientSecret writes the client side of the Secret, which the members' --trusted-ca-file, --cert-file
	// and --key-file and the engine's TLS files name; the harness's own clients follow it.
	setClientSecret := func(ca []byte, server, client harness.TLSMaterial) {
		t.Helper()
		s, err := f.c.Kube.CoreV1().Secrets(f.etcd.Namespace).Get(ctx, spec.SecretName(), metav1.GetOptions{})
		require.NoError(t, err)
		s.Data[memberapi.SecretCA] = ca
		s.Data[memberapi.SecretServerCert], s.Data[memberapi.SecretServerKey] = server.ServerCert, server.ServerKey
		s.Data[memberapi.SecretClientCert], s.Data[memberapi.SecretClientKey] = client.ClientCert, client.ClientKey
		_, err = f.c.Kube.CoreV1().Secrets(f.etcd.Namespace).Update(ctx, s, metav1.UpdateOptions{})
		require.NoError(t, err)
		f.etcd.TLS.CA = both // the harness checks members whichever CA signed what they serve
		f.etcd.TLS.ClientCert, f.etcd.TLS.ClientKey = client.ClientCert, client.ClientKey
	}
	roll := func(pass string) {
		t.Helper()
		rev := f.must.ChangeTemplate("")
		term := f.must.Term()
		res, err := f.engine(nil).Run(ctx)
		require.NoError(t, err, "pass %q", pass)
		t.Logf("pass %q: %s", pass, res.Summary())
		assert.Equal(t, 0, res.UnplannedElections, "pass %q", pass)
		assert.Equal(t, term+uint64(res.LeaderTransfers), f.must.Term(), "pass %q: the raft term rose by the transfers only", pass)
		f.requireState(rev)
	}

	setClientSecret(both, old, old)
	roll("widen trust: old and new CA")
	setClientSecret(both, next, old)
	roll("swap the members' server certificates")

	// Narrowing while the engine still presents the old CA's client certificate.
	setClientSecret(next.CA, next, old)
	f.must.ChangeTemplate("")
	err = f.runRefusedUntouched(ctx)
	require.ErrorIs(t, err, rollout.ErrClientTrust)
	assert.False(t, errors.Is(err, rollout.ErrPeerTrust), "the peers are not the matter")
	t.Logf("narrowing too early, refused:\n%v", err)
	first := strings.SplitN(err.Error(), "\n", 2)[0]
	assert.Contains(t, first, "etcd-2 (client): its new trust (CN=")
	assert.Contains(t, first, "refuses the engine's certificate")

	// The clients swapped, the narrowing pass rolls.
	setClientSecret(next.CA, next, next)
	roll("narrow trust: new CA only")
	cctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	require.NoError(t, f.etcd.WaitHealthy(cctx))
}
