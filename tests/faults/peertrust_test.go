//go:build faults

package faults_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/etcd-rollout/pulumi-etcd-rollout/rollout"
	"github.com/etcd-rollout/pulumi-etcd-rollout/tests/harness"
)

// A peer CA apart from the client CA (etcd-druid's layout; the Gardener incident) is rotated on the local
// cluster (issue 33). The one-step swap (new CA and new leaves in the peer Secret at once) is refused before
// anything restarts: the running members' peer trust refuses the new leaf, and the new trust file refuses
// the leaves they serve. The three passes then roll: widen trust (old+new CA), swap the leaves, narrow trust,
// each with 0 unplanned elections; the background client's history stays linearizable.
func TestAPeerCARotationRollsInPassesAndTheOneStepSwapIsRefused(t *testing.T) {
	t.Parallel()
	spec := harness.EtcdSpec{Name: "etcd", ServiceName: "etcd-headless", TLS: true, SeparatePeerCA: true, GracePeriod: 5 * time.Second}
	f := newFixtureOf(t, spec)
	ctx := runCtx(t)
	old := f.etcd.TLS
	full, err := spec.WithDefaults()
	require.NoError(t, err)
	next, err := harness.GenerateTLS(full, f.etcd.Namespace) // only its peer CA and peer leaf are used
	require.NoError(t, err)
	setPeerSecret := func(ca, cert, key []byte) {
		t.Helper()
		s, err := f.c.Kube.CoreV1().Secrets(f.etcd.Namespace).Get(ctx, spec.PeerSecretName(), metav1.GetOptions{})
		require.NoError(t, err)
		s.Data = map[string][]byte{"ca.crt": ca, "tls.crt": cert, "tls.key": key}
		_, err = f.c.Kube.CoreV1().Secrets(f.etcd.Namespace).Update(ctx, s, metav1.UpdateOptions{})
		require.NoError(t, err)
	}
	both := append(append([]byte{}, old.PeerCA...), next.PeerCA...)

	// The one-step swap.
	setPeerSecret(next.PeerCA, next.PeerCert, next.PeerKey)
	f.must.ChangeTemplate("")
	_, uids := f.must.Pods()
	term := f.must.Term()
	_, err = f.engine(nil).Run(ctx)
	require.ErrorIs(t, err, rollout.ErrPeerTrust)
	assert.False(t, errors.Is(err, rollout.ErrBlocked), "not waited for: refused at once")
	t.Logf("the one-step swap, refused:\n%v", err)
	assert.Contains(t, err.Error(), "refuses its new certificate (issuer CN=etcd-rollout-test-peer-ca ")
	_, after := f.must.Pods()
	assert.Equal(t, uids, after, "no pod restarted")
	assert.Equal(t, f.etcd.Spec.Replicas, f.must.Partition(), "partition locked")
	assert.Equal(t, term, f.must.Term(), "no election")

	// The passes.
	for _, pass := range []struct {
		name          string
		ca, cert, key []byte
	}{
		{"widen trust: old and new CA, old leaves", both, old.PeerCert, old.PeerKey},
		{"swap the leaves", both, next.PeerCert, next.PeerKey},
		{"narrow trust: new CA only", next.PeerCA, next.PeerCert, next.PeerKey},
	} {
		setPeerSecret(pass.ca, pass.cert, pass.key)
		rev := f.must.ChangeTemplate("")
		term := f.must.Term()
		res, err := f.engine(nil).Run(ctx)
		require.NoError(t, err, "pass %q", pass.name)
		t.Logf("pass %q: %s", pass.name, res.Summary())
		assert.Equal(t, 0, res.UnplannedElections, "pass %q", pass.name)
		assert.Equal(t, term+uint64(res.LeaderTransfers), f.must.Term(), "pass %q: the raft term rose by the transfers only", pass.name)
		f.requireState(rev)
	}
	cctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	require.NoError(t, f.etcd.WaitHealthy(cctx))
}
