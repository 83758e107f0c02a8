//go:build faults

package faults_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/etcd-rollout/pulumi-etcd-rollout/rollout"
)

// The leader is SIGKILLed mid-rollout (the member daemon restarts it, as a kubelet would). The survivors
// elect a new leader: the run counts that election as unplanned and reports it, holds while the crashed
// member is away, and finishes.
func TestLeaderCrashIsCountedAsUnplanned(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	rev := f.must.ChangeTemplate("")
	f.must.PlaceLeader(0)
	// The count the engine reports is checked against one the test makes itself: the raft term the harness
	// reads before the run and after it, less the transfers the engine announced.
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	_, termBefore, err := f.etcd.Leader(ctx)
	require.NoError(t, err)
	crashed, transfers := false, 0
	res, err := f.engine(func(_ *rollout.Config, o *rollout.Options) {
		log := o.OnEvent
		o.OnEvent = func(e rollout.Event) {
			log(e)
			if e.Kind == rollout.EventLeaderMoved {
				transfers++
			}
			if rolled(e, "etcd-2") && !crashed {
				crashed = true
				ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
				defer cancel()
				leader, _, err := f.etcd.Leader(ctx)
				require.NoError(t, err)
				require.Equal(t, 0, leader, "the leader stays on etcd-0 while etcd-2 rolls")
				require.NoError(t, f.etcd.Crash(ctx, 0))
			}
		}
	}).Run(runCtx(t))
	require.NoError(t, err)
	require.True(t, crashed)
	t.Logf("summary: %s", res.Summary())
	_, termAfter, err := f.etcd.Leader(ctx)
	require.NoError(t, err)
	measured := int(termAfter-termBefore) - transfers
	t.Logf("raft term %d before the run, %d after; %d transfers announced: %d unplanned by the test's count", termBefore, termAfter, transfers, measured)
	assert.GreaterOrEqual(t, measured, 1, "the crash cost an election")
	assert.Equal(t, measured, res.UnplannedElections, "the result counts what the test counted")
	assert.Equal(t, transfers, res.LeaderTransfers)
	assert.Contains(t, res.Summary(), "unplanned election")
	assert.Equal(t, []string{"etcd-2", "etcd-1", "etcd-0"}, res.MembersRolled)
	f.requireState(rev)
}
