//go:build integration

package engine_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/etcd-rollout/pulumi-etcd-rollout/rollout"
)

// With one member already down, taking another down would lose quorum: the run refuses and changes
// nothing. Then the same cluster shows a complete run and the no-op run after it. The faults of a running
// rollout (cancel, SIGKILL, a member or the leader crashing, concurrent runs, ...) are in tests/faults.
func TestQuorumGuardAndNoOp(t *testing.T) {
	t.Parallel()
	f := newFixture(t, httpSpec)

	t.Run("quorum guard", func(t *testing.T) {
		f.t = t
		f.must.ChangeTemplate(label(1))
		f.must.PlaceLeader(1) // freeze a follower: the cluster keeps its leader, only the margin is gone
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		require.NoError(t, f.etcd.Freeze(ctx, 0))
		defer func() { require.NoError(t, f.etcd.Thaw(context.Background(), 0)) }()
		genBefore := f.must.StatefulSet().Generation
		_, uidsBefore := f.must.Pods()

		// Before its first disruption a blocked run holds for up to the ready timeout (90 s in the tests).
		_, err := f.engine(func(c *rollout.Config, _ *rollout.Options) { c.ReadyTimeout = 5 * time.Second }).Run(runCtx(t))
		require.ErrorIs(t, err, rollout.ErrBlocked)
		assert.Contains(t, err.Error(), "still blocked after 5s (the ready timeout)")
		assert.Contains(t, err.Error(), "restarting etcd-2 would leave 1 healthy member(s), quorum is 2 of 3")
		assert.Contains(t, err.Error(), "etcd-0 unhealthy")
		assert.Equal(t, genBefore, f.must.StatefulSet().Generation, "the StatefulSet was not written")
		_, uidsAfter := f.must.Pods()
		assert.Equal(t, uidsBefore, uidsAfter, "no pod restarted")
	})

	t.Run("a complete run", func(t *testing.T) {
		f.t = t
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		require.NoError(t, f.etcd.WaitHealthy(ctx))
		rev := f.must.ChangeTemplate(label(2))
		res, err := f.engine(nil).Run(runCtx(t))
		require.NoError(t, err)
		assert.Len(t, res.MembersRolled, 3)
		f.requireRolledTo(rev)
	})

	t.Run("no-op after a complete run", func(t *testing.T) {
		f.t = t
		genBefore, termBefore := f.must.StatefulSet().Generation, f.must.Term()
		_, uidsBefore := f.must.Pods()
		res, err := f.engine(nil).Run(runCtx(t))
		require.NoError(t, err)
		assert.Empty(t, res.MembersRolled)
		assert.Zero(t, res.LeaderTransfers)
		assert.Equal(t, genBefore, f.must.StatefulSet().Generation, "the StatefulSet was not written")
		assert.Equal(t, termBefore, f.must.Term(), "no transfer, no election")
		_, uidsAfter := f.must.Pods()
		assert.Equal(t, uidsBefore, uidsAfter)
	})
}
