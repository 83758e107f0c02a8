//go:build faults

package faults_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/etcd-rollout/pulumi-etcd-rollout/rollout"
)

// Ctrl-C mid-rollout: cancelling the caller's context after one member re-locks the partition and says
// so; the next run restarts only the members that are left (new pod UIDs for exactly those).
func TestCancelledRunResumesWithTheRemainingMembers(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	rev := f.must.ChangeTemplate("")
	f.must.PlaceLeader(0)
	_, uidsBefore := f.must.Pods()

	ctx, cancel := context.WithCancel(runCtx(t))
	defer cancel()
	res, err := f.engine(func(_ *rollout.Config, o *rollout.Options) {
		log := o.OnEvent
		o.OnEvent = func(ev rollout.Event) {
			log(ev)
			if rolled(ev, "etcd-2") {
				cancel()
			}
		}
	}).Run(ctx)
	require.ErrorIs(t, err, context.Canceled)
	t.Logf("error: %v", err)
	assert.Contains(t, err.Error(), "stopped by the caller after 1 member rolled [etcd-2]; the partition is locked, run it again to roll the members that are left")
	assert.Equal(t, []string{"etcd-2"}, res.MembersRolled)
	f.requireState(rev, false, false, true)
	_, uidsCancelled := f.must.Pods()
	assert.Equal(t, []int{2}, restarted(uidsBefore, uidsCancelled), "the cancelled run restarted etcd-2 only")

	res, err = f.engine(nil).Run(runCtx(t))
	require.NoError(t, err)
	assert.Equal(t, []string{"etcd-1", "etcd-0"}, res.MembersRolled)
	assert.Equal(t, 1, res.LeaderTransfers, "leader on 0 moves once, to the updated etcd-2")
	assert.Equal(t, 0, res.UnplannedElections)
	f.requireState(rev)
	_, uidsAfter := f.must.Pods()
	assert.Equal(t, []int{0, 1}, restarted(uidsCancelled, uidsAfter), "the next run restarted only the remaining members")
}
