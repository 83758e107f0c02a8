//go:build integration

package engine_test

import (
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/etcd-rollout/pulumi-etcd-rollout/rollout"
)

// A one-member etcd (issue 34): refused at once without consent, nothing touched; with
// Config.AcceptWriteOutage, a verified snapshot first, the only member restarted (no leader move: there is
// nobody to move it to), etcd's gates, and the write outage measured. The election its restart costs (the
// only member campaigns when it starts) is reported as the restart's own, not as an unplanned one.
func TestAOneMemberEtcdRollsOnlyWithConsent(t *testing.T) {
	t.Parallel()
	spec := httpSpec
	spec.Replicas = 1
	f := newFixture(t, spec)
	ctx := runCtx(t)
	putKeys(ctx, t, f.etcd, 100)
	written, err := f.client().Put(ctx, "/onemember/last", "acknowledged")
	require.NoError(t, err)
	rev := f.must.ChangeTemplate(label(1))

	t.Run("refused at once without consent", func(t *testing.T) {
		f.t = t
		genBefore := f.must.StatefulSet().Generation
		_, uidsBefore := f.must.Pods()
		start := time.Now()
		_, err := f.engine(func(c *rollout.Config, _ *rollout.Options) { c.ReadyTimeout = time.Hour }).Run(ctx)
		require.ErrorIs(t, err, rollout.ErrSingleMember)
		assert.Less(t, time.Since(start), time.Minute, "at once, not after the ready timeout")
		assert.Contains(t, err.Error(), "accept the write outage")
		assert.Equal(t, genBefore, f.must.StatefulSet().Generation, "the StatefulSet was not written")
		_, uidsAfter := f.must.Pods()
		assert.Equal(t, uidsBefore, uidsAfter, "no pod restarted")
	})

	t.Run("rolled with consent, a snapshot first, the outage measured", func(t *testing.T) {
		f.t = t
		termBefore := f.must.Term()
		var kinds []rollout.EventKind
		res, err := f.engine(func(c *rollout.Config, o *rollout.Options) {
			c.AcceptWriteOutage = true
			log := o.OnEvent
			o.OnEvent = func(ev rollout.Event) {
				log(ev)
				kinds = append(kinds, ev.Kind)
			}
		}).Run(ctx)
		require.NoError(t, err)
		t.Logf("%s", res.Summary())
		f.requireRolledTo(rev)
		assert.Equal(t, []string{"etcd-0"}, res.MembersRolled)
		assert.Zero(t, res.LeaderTransfers)

		require.NotNil(t, res.Snapshot)
		assert.Less(t, slices.Index(kinds, rollout.EventSnapshotStored), slices.Index(kinds, rollout.EventMemberRestarting), "stored before the restart")
		assert.GreaterOrEqual(t, res.Snapshot.Revision, written.Header.Revision, "it holds the last acknowledged write")

		o := res.WriteOutage
		require.NotNil(t, o)
		assert.True(t, o.Back)
		assert.Positive(t, o.Duration)
		assert.Less(t, o.Duration, res.Members[0].Down+time.Second, "within the member's own down time, as the gates saw it")
		assert.True(t, o.LastReadBefore.Before(o.FirstReadAfter))
		assert.Equal(t, 1, o.Elections, "the only member elects itself when it starts")
		assert.Equal(t, termBefore+1, f.must.Term(), "one election: the restart's own")
		assert.False(t, res.ElectionsUnknown)
		assert.Zero(t, res.UnplannedElections, "the restart's own election is not unplanned")

		got, err := f.client().Get(ctx, "/onemember/last")
		require.NoError(t, err)
		require.Len(t, got.Kvs, 1, "the acknowledged write survived the restart")

		cm, err := f.c.Kube.CoreV1().ConfigMaps(f.etcd.Namespace).Get(ctx, rollout.StatusConfigMapName(spec.Name), metav1.GetOptions{})
		require.NoError(t, err)
		assert.Contains(t, cm.Data[rollout.StatusKeyWriteOutage], "write outage of etcd-0, the only member (accepted)")
	})
}
