//go:build integration

package engine_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	clientv3 "go.etcd.io/etcd/client/v3"
	"gocloud.dev/blob"
	_ "gocloud.dev/blob/azureblob"
	_ "gocloud.dev/blob/gcsblob"
	_ "gocloud.dev/blob/s3blob"

	"github.com/etcd-rollout/pulumi-etcd-rollout/rollout"
	"github.com/etcd-rollout/pulumi-etcd-rollout/tests/harness"
)

// A whole 3.6 → 3.5 downgrade on real etcd processes: the engine enables etcd's downgrade before the first
// restart (a 3.5 member started while the cluster version is 3.6 would not join), every member ends on the
// 3.5 binary by its own word, the cluster version is 3.5, the keys written before are all there, and the
// term rose only by the engine's transfers. Its snapshot, before the first restart, goes to the S3 server the
// cluster scripts start (versitygw), through the same s3:// code as a user's bucket; so does the snapshot of
// the upgrade back to 3.6 that follows.
func TestMinorDowngradeGoesThroughEtcdsDowngradeAPI(t *testing.T) {
	f := newFixture(t, httpSpec)
	ctx := runCtx(t)
	keys := putKeys(ctx, t, f.etcd, 500)
	before := f.must.Term()
	rev := f.must.ChangeVersion("3.5", harness.StartFaults{})
	f.c.S3.UseCredentials(t)
	to := f.c.S3.URL(t, f.etcd.Namespace)

	var said []rollout.Event
	res, err := f.engine(func(cfg *rollout.Config, o *rollout.Options) {
		cfg.SnapshotTo = to
		log := o.OnEvent
		o.OnEvent = func(ev rollout.Event) {
			log(ev)
			said = append(said, ev)
		}
	}).Run(ctx)
	require.NoError(t, err)
	t.Logf("%s", res.Summary())
	revs, _ := f.must.Pods()
	assert.Equal(t, []string{rev, rev, rev}, revs)
	assert.Regexp(t, `^3\.5\.`, res.ClusterVersion)
	for i := 0; i < 3; i++ {
		st, err := f.etcd.Status(ctx, i)
		require.NoError(t, err)
		assert.Regexp(t, `^3\.5\.`, st.Version, "etcd-%d runs 3.5 by its own word", i)
	}
	ready := slices.IndexFunc(said, func(ev rollout.Event) bool { return ev.Kind == rollout.EventDowngradeReady && ev.Step.Version == "3.5" })
	firstRestart := slices.IndexFunc(said, func(ev rollout.Event) bool { return ev.Kind == rollout.EventMemberRestarting })
	require.GreaterOrEqual(t, ready, 0, "etcd's downgrade to 3.5 enabled and waited for")
	assert.Less(t, ready, firstRestart, "enabled before the first restart")
	assert.Equal(t, before+uint64(res.LeaderTransfers), f.must.Term(), "raft term rose only by the transfers")
	assert.Equal(t, keys, countKeys(ctx, t, f.etcd), "every key written before is there")
	requireStored(ctx, t, to, res.Snapshot)

	// And up again, 3.5 → 3.6, its snapshot to the same bucket: etcd ended the downgrade once every member ran
	// 3.5, so the cluster version can rise.
	f.must.ChangeVersion("3.6", harness.StartFaults{})
	res, err = f.engine(func(cfg *rollout.Config, _ *rollout.Options) { cfg.SnapshotTo = to }).Run(ctx)
	require.NoError(t, err)
	assert.Regexp(t, `^3\.6\.`, res.ClusterVersion, "back on 3.6 after the downgrade")
	requireStored(ctx, t, to, res.Snapshot)
}

// A downgrade stopped by the caller after the engine enabled it and before any member restarted is cancelled:
// the cluster version goes back to 3.6, the partition is locked and no member restarted.
func TestDowngradeCancelledBeforeTheFirstRestartIsUndone(t *testing.T) {
	f := newFixture(t, httpSpec)
	_, uidsBefore := f.must.Pods()
	f.must.ChangeVersion("3.5", harness.StartFaults{})
	ctx, cancel := context.WithCancel(runCtx(t))
	defer cancel()
	_, err := f.engine(func(_ *rollout.Config, o *rollout.Options) {
		log := o.OnEvent
		o.OnEvent = func(ev rollout.Event) {
			log(ev)
			if ev.Kind == rollout.EventDowngradeReady && ev.Step.Version == "3.5" {
				cancel() // enabled and waited for: the next step would disrupt a member
			}
		}
	}).Run(ctx)
	require.Error(t, err)
	t.Logf("%v", err)
	assert.Contains(t, err.Error(), "etcd's downgrade to 3.5 was cancelled, since no member had restarted")
	assert.Equal(t, 3, f.must.Partition())
	_, uidsAfter := f.must.Pods()
	assert.Equal(t, uidsBefore, uidsAfter, "no member restarted")
	require.Eventually(t, func() bool {
		v, err := f.etcd.ClusterVersion(context.Background(), 0)
		return err == nil && strings.HasPrefix(v, "3.6.")
	}, 30*time.Second, 500*time.Millisecond, "the cluster version goes back to 3.6")
}

// putKeys writes n keys under /downgrade/ and returns how many there are.
func putKeys(ctx context.Context, t *testing.T, e *harness.Etcd, n int) int64 {
	t.Helper()
	cli, err := e.Client(ctx)
	require.NoError(t, err)
	defer cli.Close()
	for i := 0; i < n; i++ {
		_, err := cli.Put(ctx, fmt.Sprintf("/downgrade/%05d", i), strings.Repeat("v", 64))
		require.NoError(t, err)
	}
	return countKeys(ctx, t, e)
}

func countKeys(ctx context.Context, t *testing.T, e *harness.Etcd) int64 {
	t.Helper()
	cli, err := e.Client(ctx)
	require.NoError(t, err)
	defer cli.Close()
	resp, err := cli.Get(ctx, "/downgrade/", clientv3.WithPrefix(), clientv3.WithCountOnly())
	require.NoError(t, err)
	return resp.Count
}

// requireStored reads the snapshot rec names back from the bucket of to (s3://, gs:// or azblob://), and its record next to it: the
// bytes are the ones the engine verified (sha256), and neither the location nor the record carries a secret.
func requireStored(ctx context.Context, t *testing.T, to string, rec *rollout.SnapshotRecord) {
	t.Helper()
	require.NotNil(t, rec, "a snapshot before the first restart")
	bucket, err := blob.OpenBucket(ctx, to)
	require.NoError(t, err)
	defer bucket.Close()
	u, err := url.Parse(rec.Location)
	require.NoError(t, err)
	require.Equal(t, strings.SplitN(to, ":", 2)[0], u.Scheme, "stored in the bucket: %s", rec.Location)
	assert.Empty(t, u.RawQuery, "the location carries no endpoint parameter, nor any credential")
	prefix, _ := url.ParseQuery(strings.SplitN(to, "?", 2)[1])
	key := strings.TrimPrefix(strings.TrimPrefix(u.Path, "/"), prefix.Get("prefix"))
	body, err := bucket.ReadAll(ctx, key)
	require.NoError(t, err, "reading %s back", key)
	sum := sha256.Sum256(body)
	assert.Equal(t, rec.SHA256, hex.EncodeToString(sum[:]), "the stored bytes are the verified ones")
	assert.EqualValues(t, rec.Size, len(body))
	record, err := bucket.ReadAll(ctx, key+".json")
	require.NoError(t, err, "the record next to it")
	for _, secret := range harness.Connect(t).S3.Env(t) {
		_, value, _ := strings.Cut(secret, "=")
		assert.NotContains(t, string(record)+rec.Location, value, "no credential in the record or the location")
	}
}
