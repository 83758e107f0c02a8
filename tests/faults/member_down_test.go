//go:build faults

package faults_test

import (
	"context"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/etcd-rollout/pulumi-etcd-rollout/rollout"
)

// events collects a run's events for assertions on their order.
type events struct {
	mu  sync.Mutex
	all []rollout.Event
}

func (e *events) add(ev rollout.Event) { e.mu.Lock(); e.all = append(e.all, ev); e.mu.Unlock() }

// index is the position of the first event that matches, or -1.
func (e *events) index(match func(rollout.Event) bool) int {
	e.mu.Lock()
	defer e.mu.Unlock()
	return slices.IndexFunc(e.all, match)
}

// ofKind matches the events of kind.
func ofKind(kind rollout.EventKind) func(rollout.Event) bool {
	return func(e rollout.Event) bool { return e.Kind == kind }
}

// A member that is not being rolled goes down (frozen: alive, answering nothing) right after the first
// member rolled. Restarting the next one would leave one healthy member of three, so the engine holds,
// disrupting nothing; when the member is back it resumes and finishes.
func TestMemberDownHoldsThenResumes(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	rev := f.must.ChangeTemplate("")
	f.must.PlaceLeader(1) // etcd-0 is a follower: freezing it costs no election
	var ev events
	var thawed sync.Once
	res, err := f.engine(func(_ *rollout.Config, o *rollout.Options) {
		log := o.OnEvent
		o.OnEvent = func(e rollout.Event) {
			log(e)
			ev.add(e)
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			switch {
			case rolled(e, "etcd-2"):
				require.NoError(t, f.etcd.Freeze(ctx, 0))
			case e.Kind == rollout.EventHolding:
				go func() {
					time.Sleep(3 * time.Second) // several polls while held
					thawed.Do(func() { assert.NoError(t, f.etcd.Thaw(context.Background(), 0)) })
				}()
			}
		}
	}).Run(runCtx(t))
	thawed.Do(func() { require.NoError(t, f.etcd.Thaw(context.Background(), 0)) })
	require.NoError(t, err)
	held, unblocked := ev.index(ofKind(rollout.EventHolding)), ev.index(ofKind(rollout.EventUnblocked))
	next := ev.index(func(e rollout.Event) bool { return memberEvent(e, rollout.EventMemberRestarting, "etcd-1") })
	require.NotEqual(t, -1, held, "the engine held while etcd-0 was down")
	require.NotNil(t, ev.all[held].Blocked, "a hold says what blocks it")
	assert.Contains(t, ev.all[held].Blocked.Reason, "etcd-0")
	require.NotEqual(t, -1, unblocked)
	assert.Less(t, held, unblocked)
	assert.Less(t, unblocked, next, "etcd-1 restarted only after etcd-0 was back")
	assert.Equal(t, []string{"etcd-2", "etcd-1", "etcd-0"}, res.MembersRolled)
	f.requireState(rev)
}

// The same, but the member stays down past the hold's limit (the health timeout): the run fails naming
// the member that is down, with the partition locked and the remaining members untouched.
func TestMemberDownPastTheLimitFails(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	rev := f.must.ChangeTemplate("")
	f.must.PlaceLeader(1)
	_, uidsBefore := f.must.Pods()
	defer func() { require.NoError(t, f.etcd.Thaw(context.Background(), 0)) }()
	res, err := f.engine(func(c *rollout.Config, o *rollout.Options) {
		c.HealthTimeout = 5 * time.Second
		log := o.OnEvent
		o.OnEvent = func(e rollout.Event) {
			log(e)
			if rolled(e, "etcd-2") {
				ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
				defer cancel()
				require.NoError(t, f.etcd.Freeze(ctx, 0))
			}
		}
	}).Run(runCtx(t))
	require.ErrorIs(t, err, rollout.ErrBlocked)
	t.Logf("error: %v", err)
	assert.Contains(t, err.Error(), "still blocked after 5s")
	assert.Contains(t, err.Error(), "restarting etcd-1 would leave 1 healthy member(s), quorum is 2 of 3")
	assert.Contains(t, err.Error(), "etcd-0 unhealthy")
	assert.Equal(t, []string{"etcd-2"}, res.MembersRolled)

	require.NoError(t, f.etcd.Thaw(context.Background(), 0))
	f.requireState(rev, false, false, true)
	_, uidsAfter := f.must.Pods()
	assert.Equal(t, []int{2}, restarted(uidsBefore, uidsAfter))
}
