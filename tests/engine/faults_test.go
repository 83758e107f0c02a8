//go:build integration

package engine_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"

	"github.com/etcd-rollout/pulumi-etcd-rollout/rollout"
)

// Cancelling the caller's context after one member re-locks the partition; the next run rolls only the
// members that are left.
func TestResumeAfterCancel(t *testing.T) {
	t.Parallel()
	f := newFixture(t, httpSpec)
	rev := f.changeTemplate(label(0))
	f.placeLeader(0)

	ctx, cancel := context.WithCancel(runCtx(t))
	defer cancel()
	res, err := f.engine(func(_ *rollout.Config, o *rollout.Options) {
		log := o.OnEvent
		o.OnEvent = func(ev rollout.Event) {
			log(ev)
			if strings.HasPrefix(ev.Message, "etcd-2 rolled") {
				cancel()
			}
		}
	}).Run(ctx)
	require.ErrorIs(t, err, context.Canceled)
	assert.Equal(t, []string{"etcd-2"}, res.MembersRolled)
	assert.Equal(t, 3, f.partition(), "re-locked on cancel")
	revs, _ := f.pods()
	assert.Equal(t, rev, revs[2])
	assert.NotEqual(t, rev, revs[1])
	assert.NotEqual(t, rev, revs[0])

	res, err = f.engine(nil).Run(runCtx(t))
	require.NoError(t, err)
	assert.Equal(t, []string{"etcd-1", "etcd-0"}, res.MembersRolled)
	assert.Equal(t, 1, res.LeaderTransfers, "leader on 0 moves once, to the updated etcd-2")
	assert.Equal(t, 0, res.UnplannedElections)
	f.requireRolledTo(rev)
}

// A revision whose member never becomes healthy stops the run at that member, with a timeout naming it;
// no other member is touched and the partition is re-locked.
func TestNeverHealthyRevisionStopsAtTheFirstMember(t *testing.T) {
	t.Parallel()
	f := newFixture(t, httpSpec)
	_, uidsBefore := f.pods()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	_, err := f.etcd.UpdateTemplate(ctx, func(tpl *corev1.PodTemplateSpec) {
		tpl.Annotations["etcd-rollout.test/broken"] = "true"
	})
	require.NoError(t, err)

	_, err = f.engine(func(cfg *rollout.Config, _ *rollout.Options) {
		cfg.ReadyTimeout = 30 * time.Second
		cfg.HealthTimeout = 8 * time.Second
	}).Run(runCtx(t))
	var gate *rollout.GateTimeoutError
	require.ErrorAs(t, err, &gate, "got %v", err)
	assert.Equal(t, "etcd-2", gate.Pod)
	assert.Contains(t, err.Error(), "etcd-2 did not pass the")
	t.Logf("error: %v", err)

	assert.Equal(t, 3, f.partition(), "re-locked")
	_, uidsAfter := f.pods()
	assert.Equal(t, uidsBefore[0], uidsAfter[0], "etcd-0 untouched")
	assert.Equal(t, uidsBefore[1], uidsAfter[1], "etcd-1 untouched")
	assert.NotEqual(t, uidsBefore[2], uidsAfter[2], "etcd-2 was the one tried")
}

// With one member already down, taking another down would lose quorum: the run refuses and changes
// nothing. Then the same cluster shows the no-op run and two concurrent runs.
func TestQuorumGuardNoOpAndConcurrentRuns(t *testing.T) {
	t.Parallel()
	f := newFixture(t, httpSpec)

	t.Run("quorum guard", func(t *testing.T) {
		f.t = t
		f.changeTemplate(label(1))
		f.placeLeader(1) // freeze a follower: the cluster keeps its leader, only the margin is gone
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		require.NoError(t, f.etcd.Freeze(ctx, 0))
		defer func() { require.NoError(t, f.etcd.Thaw(context.Background(), 0)) }()
		genBefore := f.sts().Generation
		_, uidsBefore := f.pods()

		_, err := f.engine(nil).Run(runCtx(t))
		require.ErrorIs(t, err, rollout.ErrBlocked)
		assert.Contains(t, err.Error(), "restarting etcd-2 would leave 1 healthy member(s), quorum is 2 of 3")
		assert.Contains(t, err.Error(), "etcd-0 unhealthy")
		assert.Equal(t, genBefore, f.sts().Generation, "the StatefulSet was not written")
		_, uidsAfter := f.pods()
		assert.Equal(t, uidsBefore, uidsAfter, "no pod restarted")
	})

	t.Run("concurrent runs: exactly one proceeds", func(t *testing.T) {
		f.t = t
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		require.NoError(t, f.etcd.WaitHealthy(ctx))
		rev := f.changeTemplate(label(2))
		engines := []*rollout.Engine{
			f.engine(func(c *rollout.Config, _ *rollout.Options) { c.Holder = "run-a" }),
			f.engine(func(c *rollout.Config, _ *rollout.Options) { c.Holder = "run-b" }),
		}
		results := make([]rollout.Result, 2)
		errs := make([]error, 2)
		var wg sync.WaitGroup
		for i, e := range engines {
			wg.Add(1)
			go func() { defer wg.Done(); results[i], errs[i] = e.Run(runCtx(t)) }()
		}
		wg.Wait()
		var locked *rollout.LockedError
		ok, refused := 0, 0
		for i, err := range errs {
			switch {
			case err == nil:
				ok++
				assert.Len(t, results[i].MembersRolled, 3)
			case errors.As(err, &locked):
				refused++
				assert.Contains(t, []string{"run-a", "run-b"}, locked.Holder)
			default:
				t.Errorf("unexpected error: %v", err)
			}
		}
		assert.Equal(t, 1, ok)
		assert.Equal(t, 1, refused)
		f.requireRolledTo(rev)
	})

	t.Run("no-op after a complete run", func(t *testing.T) {
		f.t = t
		genBefore, termBefore := f.sts().Generation, f.term()
		_, uidsBefore := f.pods()
		res, err := f.engine(nil).Run(runCtx(t))
		require.NoError(t, err)
		assert.Empty(t, res.MembersRolled)
		assert.Zero(t, res.LeaderTransfers)
		assert.Equal(t, genBefore, f.sts().Generation, "the StatefulSet was not written")
		assert.Equal(t, termBefore, f.term(), "no transfer, no election")
		_, uidsAfter := f.pods()
		assert.Equal(t, uidsBefore, uidsAfter)
	})
}
