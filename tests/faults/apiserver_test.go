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

// The API server restarts while a member is in flight (tests/cluster/restart-apiserver.sh: SIGTERM, 2 s
// away, started again with the same flags). The engine retries its reads and writes, re-dials its
// port-forwards, keeps its lease, and finishes.
//
// Not parallel: every test of the package would see the API server go away. Go runs it before the
// parallel tests start.
func TestAPIServerRestartMidRollout(t *testing.T) {
	f := newFixture(t)
	rev := f.must.ChangeTemplate("")
	res, back, err := f.rollRestartingAPIServer(nil, func(e rollout.Event) bool {
		return memberEvent(e, rollout.EventPartitionLowered, "etcd-1") // etcd-1 in flight
	})
	require.NoError(t, err)
	assert.Equal(t, []string{"etcd-2", "etcd-1", "etcd-0"}, res.MembersRolled)
	assert.Zero(t, res.UnplannedElections)
	f.requireState(rev)
	// The background client dials the members directly (not through port-forwards, so not through the API
	// server): it must have kept a history across the restart long enough to judge, whatever the timing.
	require.True(t, f.waitHistory(back, minAckedPuts, 30*time.Second),
		"the background client made fewer than %d acknowledged puts (or no get) after the API server came back", minAckedPuts)

	// The other cases start right after this one, each with a new cluster: wait until the members of a new
	// cluster are reachable through the engine's port-forwards (kwok takes a while to watch the forwards of
	// new pods again after the restart).
	start := time.Now()
	newFixture(t)
	t.Logf("a new cluster is reachable through port-forwards %s after the rollout finished", time.Since(start).Round(100*time.Millisecond))
}

// The API server restarts while the engine cools down after its first member: every port-forward ends, and
// none can be opened until it is back. A member the engine cannot look at has not failed: the engine waits
// until it can look again and finds the same etcd process serving, where it used to revert a healthy member
// (the cool-down's first failed look was taken for the member's own).
func TestAPIServerRestartDuringCoolDown(t *testing.T) {
	f := newFixture(t)
	rev := f.must.ChangeTemplate("")
	res, _, err := f.rollRestartingAPIServer(func(cfg *rollout.Config) { cfg.Cooldown = 15 * time.Second }, func(e rollout.Event) bool {
		return e.Kind == rollout.EventCoolingDown // etcd-2 passed its gates
	})
	require.NoError(t, err)
	assert.Equal(t, []string{"etcd-2", "etcd-1", "etcd-0"}, res.MembersRolled)
	assert.Nil(t, res.Failure)
	assert.Zero(t, res.UnplannedElections)
	f.requireState(rev)
	start := time.Now()
	newFixture(t)
	t.Logf("a new cluster is reachable through port-forwards %s after the rollout finished", time.Since(start).Round(100*time.Millisecond))
}

// rollRestartingAPIServer runs the engine and restarts the API server (2 s away) at the first event that
// trigger accepts, returning the result, when the API server answered again, and the run's error.
func (f *fixture) rollRestartingAPIServer(mutate func(*rollout.Config), trigger func(rollout.Event) bool) (rollout.Result, time.Time, error) {
	t := f.t
	restartErr := make(chan error, 1)
	var back time.Time
	started := false
	res, err := f.engine(func(cfg *rollout.Config, o *rollout.Options) {
		if mutate != nil {
			mutate(cfg)
		}
		log := o.OnEvent
		o.OnEvent = func(e rollout.Event) {
			log(e)
			if trigger(e) && !started {
				started = true
				go func() {
					ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
					defer cancel()
					t.Logf("%s restarting kube-apiserver", time.Now().Format("15:04:05.000"))
					err := f.c.RestartAPIServer(ctx, 2*time.Second)
					back = time.Now()
					t.Logf("%s kube-apiserver back (err %v)", back.Format("15:04:05.000"), err)
					restartErr <- err
				}()
			}
		}
	}).Run(runCtx(t))
	require.True(t, started)
	require.NoError(t, <-restartErr)
	return res, back, err
}
