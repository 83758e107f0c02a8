//go:build e2e && faults

package e2e

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/anishathalye/porcupine"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/etcd-rollout/pulumi-etcd-rollout/tests/harness"
)

// examples/yaml-peerca through the plain pulumi CLI (issue 33, item 5): a peer CA apart from the client CA,
// its Secret written outside the stack as cert-manager would. The one-step swap (new CA and new leaves at once)
// is refused by `pulumi preview` and by `pulumi up`, with the leader on the first member to restart, and
// nothing moves: no pod restarted, no leader moved, the raft term unchanged, the partition locked. The three
// passes (widen trust, swap the leaves, narrow trust) each roll every member through `pulumi up` with 0
// unplanned elections and the raft term up by the reported transfers only; the retrying client (the bench's
// policy) loses no write, and the background client's history stays linearizable.
func TestFaultsPeerCARotationExampleThroughPulumiUp(t *testing.T) {
	p := repoPaths(t)
	c := harness.Connect(t)
	ctx := t.Context()
	ns := c.Namespace(t)
	spec, err := harness.EtcdSpec{Name: "etcd", ServiceName: "etcd-headless", Replicas: 3, TLS: true, SeparatePeerCA: true}.WithDefaults()
	require.NoError(t, err)
	old, err := harness.GenerateTLS(spec, ns)
	require.NoError(t, err)
	next, err := harness.GenerateTLS(spec, ns) // only its peer CA and peer leaf are used
	require.NoError(t, err)
	writeSecret(ctx, t, c, ns, spec.SecretName(), old.SecretData())
	peer := func(ca, cert, key []byte) {
		t.Helper()
		writeSecret(ctx, t, c, ns, spec.PeerSecretName(), map[string][]byte{"ca.crt": ca, "tls.crt": cert, "tls.key": key})
	}
	peer(old.PeerCA, old.PeerCert, old.PeerKey)

	cli := newYAMLStack(t, p, c, ns, "yaml-peerca", map[string]string{"cooldownSeconds": "1"})
	cli.run(t, "up", "--yes", "--skip-preview")
	requireRolledAndLocked(t, viewStatefulSet(ctx, t, c, ns))
	e, err := c.AttachEtcd(ns, spec)
	require.NoError(t, err)
	e.TLS = &old
	require.NoError(t, e.WaitHealthy(ctx))
	etcd, err := e.Client(ctx)
	require.NoError(t, err)
	defer etcd.Close()
	rec := harness.StartRecorder(ctx, etcd, harness.RecorderOptions{})
	writer := harness.StartRetryingWriter(ctx, etcd, "retrying/key", 20*time.Millisecond,
		harness.RetryPolicy{AttemptTimeout: 500 * time.Millisecond, Backoff: 25 * time.Millisecond, Deadline: 5 * time.Second})

	// The one-step swap, with the leader on etcd-2, the first member the plan restarts.
	peer(next.PeerCA, next.PeerCert, next.PeerKey)
	cli.run(t, "config", "set", "peerTlsRevision", "one-step-swap")
	e.Must(t).PlaceLeader(2)
	_, uids := e.Must(t).Pods()
	term := e.Must(t).Term()
	preview := cli.fails(t, "preview", "--diff")
	assert.Contains(t, preview, "a restart would cut a member off its peers: etcd-2 (peer): etcd-0 refuses its new certificate", "the preview refuses")
	assert.Contains(t, preview, "widen trust first")
	up := cli.fails(t, "up", "--yes", "--skip-preview")
	assert.Contains(t, up, "refuses its new certificate", "the run refuses")
	t.Logf("the one-step swap, refused by pulumi up:\n%s", tail(up, 12))
	_, after := e.Must(t).Pods()
	assert.Equal(t, uids, after, "no pod restarted")
	assert.Equal(t, term, e.Must(t).Term(), "no leader moved, no election")
	assert.Equal(t, 3, viewStatefulSet(ctx, t, c, ns).Partition, "the partition is locked")

	both := append(append([]byte{}, old.PeerCA...), next.PeerCA...)
	for _, pass := range []struct {
		name          string
		ca, cert, key []byte
	}{
		{"widen-trust", both, old.PeerCert, old.PeerKey},
		{"swap-leaves", both, next.PeerCert, next.PeerKey},
		{"narrow-trust", next.PeerCA, next.PeerCert, next.PeerKey},
	} {
		peer(pass.ca, pass.cert, pass.key)
		cli.run(t, "config", "set", "peerTlsRevision", pass.name)
		preview := cli.run(t, "preview", "--diff")
		assert.Contains(t, preview, "roll etcd-2", "pass %s: the preview shows the roll", pass.name)
		term := e.Must(t).Term()
		out := cli.run(t, "up", "--yes", "--skip-preview")
		t.Logf("pass %s:\n%s", pass.name, tail(out, 8))
		requireRolledAndLocked(t, viewStatefulSet(ctx, t, c, ns))
		var outputs map[string]any
		require.NoError(t, json.Unmarshal([]byte(cli.run(t, "stack", "output", "--json")), &outputs))
		assert.EqualValues(t, 0, outputs["unplannedElections"], "pass %s", pass.name)
		transfers, ok := outputs["leaderTransfers"].(float64)
		require.True(t, ok, "pass %s: leaderTransfers output %v", pass.name, outputs["leaderTransfers"])
		assert.Equal(t, term+uint64(transfers), e.Must(t).Term(), "pass %s: the raft term rose by the %v transfers only", pass.name, transfers)
	}
	require.NoError(t, e.WaitHealthy(ctx), "every member healthy on the new peer CA alone")
	writes, failed := writer.Stop()
	t.Logf("retrying writer: %d writes, %d failed %v", writes, len(failed), failed)
	assert.Greater(t, writes, 100, "the retrying writer made progress")
	assert.Empty(t, failed, "no write failed for the retrying client")
	ops := rec.Stop()
	check := harness.CheckLinearizable(ops, 2*time.Minute)
	t.Logf("background client: %s; %s", harness.SummarizeHistory(ops), check.Result)
	assert.Equal(t, porcupine.Ok, check.Result, "no acknowledged write lost, no stale read")
	cli.run(t, "destroy", "--yes", "--skip-preview")
}

// writeSecret creates or replaces Secret name in ns with data, as cert-manager (or a platform's PKI) writes
// the Secrets a stack's pods mount.
func writeSecret(ctx context.Context, t *testing.T, c *harness.Cluster, ns, name string, data map[string][]byte) {
	t.Helper()
	secrets := c.Kube.CoreV1().Secrets(ns)
	s, err := secrets.Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		_, err = secrets.Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: name}, Type: corev1.SecretTypeOpaque, Data: data}, metav1.CreateOptions{})
		require.NoError(t, err)
		return
	}
	s.Data = data
	_, err = secrets.Update(ctx, s, metav1.UpdateOptions{})
	require.NoError(t, err)
}
