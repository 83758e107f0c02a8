//go:build faults

package faults_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/etcd-rollout/pulumi-etcd-rollout/rollout"
	"github.com/etcd-rollout/pulumi-etcd-rollout/tests/harness"
)

// A run that resumes must re-prove a canary it did not watch (issue 21, item 1). The new revision crashes
// etcd-2 10 s after every start. Run A restarts etcd-2, sees it pass its gates (the 3 s stability window is
// far shorter than 10 s) and is cancelled at the start of its cool-down, as a Ctrl-C or a `customTimeouts`
// would stop it. Run B, a new engine started at once, finds etcd-2 at the update revision and healthy: it has
// not seen it pass, so it must give it the full stability window and the cool-down watch before disrupting
// anything else, and must not move the leader onto it meanwhile. The crash comes inside that watch: B fails
// on etcd-2 and reverts it, and neither etcd-1 nor etcd-0 is ever restarted.
//
// The cool-down (15 s for both runs) is what outlasts the crash; A never waits it out (it is cancelled as
// the cool-down starts). The leader starts on etcd-1, so a B that trusts etcd-2 moves the leader onto the
// crash-looping member before restarting etcd-1.
func TestResumedRunReprovesTheCanaryItDidNotWatch(t *testing.T) {
	t.Parallel()
	const crashAfter = 10 * time.Second
	f := newFixture(t)
	f.must.PlaceLeader(1)
	revsBefore, uidsBefore := f.must.Pods()
	rev := f.must.ChangeStartFaults(harness.StartFaults{CrashAfter: crashAfter, Ordinals: []int{2}})
	settings := func(c *rollout.Config) {
		c.Cooldown, c.ReadyTimeout, c.HealthTimeout = 15*time.Second, 20*time.Second, 15*time.Second
	}

	// Run A: cancelled at its first cool-down, right after etcd-2 passed its gates.
	ctxA, cancelA := context.WithCancel(runCtx(t))
	defer cancelA()
	var startsAtCancel int
	resA, errA := f.engine(func(c *rollout.Config, o *rollout.Options) {
		settings(c)
		c.Holder = "run-a"
		log := o.OnEvent
		o.OnEvent = func(e rollout.Event) {
			log(e)
			if e.Kind == rollout.EventCoolingDown && ctxA.Err() == nil {
				ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
				defer cancel()
				if m, err := f.etcd.Member(ctx, 2); err == nil {
					startsAtCancel = m.Starts
				}
				cancelA()
			}
		}
	}).Run(ctxA)
	t.Logf("run A: %v", errA)
	require.ErrorIs(t, errA, context.Canceled, "run A was to be cancelled at its cool-down")
	require.Equal(t, []string{"etcd-2"}, resA.MembersRolled, "run A rolled etcd-2 and was cancelled before anything else")
	require.Equal(t, 3, f.must.Partition(), "run A re-locked")

	// Run B: a new engine, as the next `pulumi up` would be, started at once.
	var mu sync.Mutex
	var restartedByB, movesOntoCanary []string
	var startsAtPlan int
	resB, errB := f.engine(func(c *rollout.Config, o *rollout.Options) {
		settings(c)
		c.Holder = "run-b"
		log := o.OnEvent
		o.OnEvent = func(e rollout.Event) {
			log(e)
			mu.Lock()
			defer mu.Unlock()
			switch {
			case e.Kind == rollout.EventPlanned:
				ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
				defer cancel()
				if m, err := f.etcd.Member(ctx, 2); err == nil {
					startsAtPlan = m.Starts
				}
			case e.Kind == rollout.EventMemberRestarting:
				restartedByB = append(restartedByB, e.Pod)
			case e.Kind == rollout.EventLeaderMoving && e.To == "etcd-2":
				movesOntoCanary = append(movesOntoCanary, e.Message)
			}
		}
	}).Run(runCtx(t))
	t.Logf("run B: %v", errB)
	// Whether etcd-2 was still in the life A saw pass when B planned (if it had crashed already, B saw it
	// down, and even today's engine watches it): logged, so a pass on unfixed code can be told apart.
	t.Logf("etcd-2 member starts: %d when A was cancelled, %d when B planned", startsAtCancel, startsAtPlan)

	mu.Lock()
	assert.NotContains(t, restartedByB, "etcd-1", "run B restarted etcd-1 while the canary it had not watched was about to crash (restarts: %v)", restartedByB)
	assert.Empty(t, movesOntoCanary, "run B moved the leader onto the canary it had not watched")
	mu.Unlock()
	var reverted *rollout.RevertedError
	if assert.ErrorAs(t, errB, &reverted, "run B must fail on etcd-2 and revert it") {
		assert.Equal(t, "etcd-2", reverted.Pod)
		assert.Equal(t, rev, reverted.From)
	}
	assert.Empty(t, resB.MembersRolled, "run B rolled nothing")

	require.Equal(t, 3, f.must.Partition(), "partition locked at the end")
	revs, uidsAfter := f.must.Pods()
	changed := restarted(uidsBefore, uidsAfter)
	assert.NotContains(t, changed, 1, "etcd-1 was never restarted")
	assert.NotContains(t, changed, 0, "etcd-0 was never restarted")
	assert.Equal(t, revsBefore[2], revs[2], "etcd-2 is back on the old revision")
	assert.NotEqual(t, rev, revs[1])
	assert.NotEqual(t, rev, revs[0])
}
