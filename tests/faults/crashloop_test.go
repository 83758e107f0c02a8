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

// A new revision whose members crash 2 s after every start (CrashLoopBackOff, Ready flapping with no
// readinessProbe) must not be taken for a healthy one in one of its short lives: the run fails at etcd-2
// with a gate timeout that names the member and the gate, with the partition locked and etcd-1 and etcd-0
// untouched. The bound on the run's length is the failure path's promise (ready timeout + health timeout
// + slack, inside docs/usage.md's readyTimeoutSeconds + 60 s), not a speed claim.
func TestCrashLoopingRevisionFailsAtTheFirstMember(t *testing.T) {
	t.Parallel()
	const (
		readyTimeout  = 20 * time.Second
		healthTimeout = 15 * time.Second
		slack         = 20 * time.Second
	)
	f := newFixture(t)
	f.must.PlaceLeader(0)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	crashing, err := f.etcd.Member(ctx, 2)
	require.NoError(t, err)
	rev := f.must.ChangeStartFaults(harness.StartFaults{CrashAfter: 2 * time.Second})
	_, uidsBefore := f.must.Pods()

	var mu sync.Mutex
	var restartedPods []string
	start := time.Now()
	res, err := f.engine(func(c *rollout.Config, o *rollout.Options) {
		// onFailure stop: this test is about catching the crash loop, and looks at the member still looping
		// afterwards; the revert of such a member is TestNeverHealthyRevisionStopsAtTheFirstMember's and
		// tests/e2e TestFaultsBadRevisionIsReverted's.
		c.ReadyTimeout, c.HealthTimeout, c.OnFailure = readyTimeout, healthTimeout, rollout.FailureStop
		log := o.OnEvent
		o.OnEvent = func(e rollout.Event) {
			log(e)
			if e.Kind == rollout.EventMemberRestarting {
				mu.Lock()
				restartedPods = append(restartedPods, e.Pod)
				mu.Unlock()
			}
		}
	}).Run(runCtx(t))
	took := time.Since(start)
	t.Logf("run ended after %s: %v", took.Round(100*time.Millisecond), err)

	var gate *rollout.GateTimeoutError
	require.ErrorAs(t, err, &gate, "a crash-looping member must fail a gate, got %v", err)
	assert.Equal(t, "etcd-2", gate.Pod)
	assert.Contains(t, []string{rollout.GatePodReady, rollout.GateEtcdHealth}, gate.Gate)
	assert.Contains(t, err.Error(), "etcd-2 did not pass the "+gate.Gate+" gate within")
	assert.Contains(t, err.Error(), "the partition is locked again, so no other member restarts: look at etcd-2")
	assert.Less(t, took, readyTimeout+healthTimeout+slack, "the failure came within the gates' timeouts")
	assert.Empty(t, res.MembersRolled, "a crash-looping member is never counted as rolled")
	mu.Lock()
	assert.Equal(t, []string{"etcd-2"}, restartedPods, "only etcd-2 was restarted")
	mu.Unlock()

	// The crash loop really ran during the run: the member of etcd-2 started more than once since.
	ctx, cancel = context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	m, err := f.etcd.Member(ctx, 2)
	require.NoError(t, err)
	assert.GreaterOrEqual(t, m.Starts-crashing.Starts, 3, "etcd-2 crashed and was restarted during the run (last exit: %s)", m.LastExit)
	assert.Contains(t, m.LastExit, "crash-after")

	require.Equal(t, 3, f.must.Partition(), "re-locked")
	revs, uidsAfter := f.must.Pods()
	assert.Equal(t, []int{2}, restarted(uidsBefore, uidsAfter), "etcd-1 and etcd-0 untouched")
	assert.Equal(t, rev, revs[2])
	assert.NotEqual(t, rev, revs[1])
	assert.NotEqual(t, rev, revs[0])
	// Quorum on the two untouched members: the background client's check (at cleanup) shows nothing lost,
	// and a write through them alone succeeds now, with etcd-2 still crash-looping.
	cli, err := f.etcd.Client(ctx, 0, 1)
	require.NoError(t, err)
	defer cli.Close()
	_, err = cli.Put(ctx, "quorum-without-etcd-2", "ok")
	require.NoError(t, err)
}
