//go:build faults

package faults_test

import (
	"errors"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/etcd-rollout/pulumi-etcd-rollout/rollout"
)

// Two rollouts of one StatefulSet at once: exactly one proceeds; the other fails without touching
// anything, naming the holder and when to retry.
func TestConcurrentRunsExactlyOneProceeds(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	rev := f.must.ChangeTemplate("")
	_, uidsBefore := f.must.Pods()
	holders := []string{"run-a", "run-b"}
	engines := make([]*rollout.Engine, len(holders))
	for i, h := range holders {
		engines[i] = f.engine(func(c *rollout.Config, _ *rollout.Options) { c.Holder = h })
	}
	results := make([]rollout.Result, len(engines))
	errs := make([]error, len(engines))
	var mu sync.Mutex
	var order []int // which run returned first
	var wg sync.WaitGroup
	for i, e := range engines {
		wg.Add(1)
		go func() {
			defer wg.Done()
			results[i], errs[i] = e.Run(runCtx(t))
			mu.Lock()
			order = append(order, i)
			mu.Unlock()
		}()
	}
	wg.Wait()

	winner, loser := 0, 1
	if errs[0] != nil {
		winner, loser = 1, 0
	}
	require.NoError(t, errs[winner])
	assert.Len(t, results[winner].MembersRolled, 3)
	var locked *rollout.LockedError
	require.ErrorAs(t, errs[loser], &locked, "got %v", errs[loser])
	t.Logf("refused: %v", errs[loser])
	assert.Equal(t, holders[winner], locked.Holder, "the refusal names the run that holds the lease")
	assert.Contains(t, errs[loser].Error(), "another rollout holds lease "+f.etcd.Namespace+"/etcd-etcd-rollout: "+holders[winner])
	assert.Contains(t, errs[loser].Error(), "wait for it to finish, or if it is gone, retry after")
	assert.Empty(t, results[loser].MembersRolled)
	assert.Equal(t, []int{loser, winner}, order, "the refused run returned first: it did not wait for the lease")
	f.requireState(rev)
	_, uidsAfter := f.must.Pods()
	assert.Equal(t, []int{0, 1, 2}, restarted(uidsBefore, uidsAfter), "every member restarted")
	assert.Zero(t, results[winner].UnplannedElections)
	assert.False(t, errors.Is(errs[loser], rollout.ErrInterference))
}
