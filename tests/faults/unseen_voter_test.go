//go:build faults

package faults_test

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/types"

	"github.com/etcd-rollout/pulumi-etcd-rollout/rollout"
	"github.com/etcd-rollout/pulumi-etcd-rollout/rollout/memberdial"
	"github.com/etcd-rollout/pulumi-etcd-rollout/tests/harness"
)

// memberEvent says e is the run's event of kind about pod: a hook on the engine's typed events, not its prose.
func memberEvent(e rollout.Event, kind rollout.EventKind, pod string) bool {
	return e.Kind == kind && e.Pod == pod
}

// rolled says e is the run's report that pod passed its gates on the new revision.
func rolled(e rollout.Event, pod string) bool { return memberEvent(e, rollout.EventMemberRolled, pod) }

// etcd2Ready says e is the run's restarted etcd-2 Ready and about to face its etcd gate.
func etcd2Ready(e rollout.Event) bool { return memberEvent(e, rollout.EventMemberReady, "etcd-2") }

// A member that does not answer us is not out of the cluster (issue 21, item 2). The new revision's etcd-2
// refuses our clients on its client port while its peer port votes (clients-refused): to the engine it never
// passes its etcd gate, yet it is one of the two voters that keep quorum once etcd-0 is frozen (alive,
// answering nothing) right when etcd-2 turns Ready. Deleting etcd-2's pod then would leave etcd-1 alone. So
// etcd-2's pod must still be the one that was Ready, and a client of etcd-1 and etcd-2 (the harness dials
// them directly, behind the refusing port) must have every put acknowledged from the freeze to the run's
// end, with etcd-0 still frozen.
func TestUnseenVoterIsNotDeletedWhileAnotherMemberIsDown(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	f.must.PlaceLeader(1) // etcd-0 is a follower: freezing it costs no election, and etcd-2 needs no transfer
	rev := f.must.ChangeStartFaults(harness.StartFaults{ClientsRefused: true, Ordinals: []int{2}})
	_, uidsBefore := f.must.Pods()

	var (
		frozen   bool
		readyUID types.UID // etcd-2's pod when it turned Ready on the new revision
		quorum   *harness.Recorder
	)
	defer func() {
		if frozen {
			require.NoError(t, f.etcd.Thaw(context.Background(), 0))
		}
	}()
	res, err := f.engine(func(c *rollout.Config, o *rollout.Options) {
		c.ReadyTimeout, c.HealthTimeout = 20*time.Second, 10*time.Second
		log := o.OnEvent
		o.OnEvent = func(e rollout.Event) {
			log(e)
			if frozen || !etcd2Ready(e) {
				return
			}
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			pod, err := f.etcd.Pod(ctx, 2)
			require.NoError(t, err)
			readyUID = pod.UID
			// The premise is a follower frozen: on a loaded machine a missed heartbeat may have made etcd-0
			// the leader since PlaceLeader, and freezing a leader costs an election the engine did not cause.
			if leader, _, err := f.etcd.Leader(ctx); err == nil && leader == 0 {
				t.Logf("etcd-0 leads (an election since the start): moving the leader to etcd-1 before freezing etcd-0")
				require.NoError(t, f.etcd.MoveLeader(ctx, 1))
			}
			require.NoError(t, f.etcd.Freeze(ctx, 0))
			frozen = true
			cli, err := f.etcd.Client(ctx, 1, 2)
			require.NoError(t, err)
			t.Cleanup(func() { _ = cli.Close() })
			quorum = harness.StartRecorder(context.Background(), cli, harness.RecorderOptions{Prefix: "quorum-of-1-and-2/"})
		}
	}).Run(runCtx(t))
	require.True(t, frozen, "the run never reported etcd-2 Ready: etcd-0 was not frozen")
	ops := quorum.Stop()
	t.Logf("run: %v", err)
	require.Error(t, err, "etcd-2 never answered the engine: the run cannot succeed")

	sum := harness.SummarizeHistory(ops)
	t.Logf("client of etcd-1 and etcd-2 from the freeze to the run's end: %s", sum)
	assert.Zero(t, sum.Unknown, "puts through etcd-1 and etcd-2 failed while etcd-0 was frozen: quorum was lost (first failure: %s)", firstFailedPut(ops))
	assert.GreaterOrEqual(t, sum.Puts, minAckedPuts, "too few acknowledged puts to show anything")

	assert.NotEqual(t, uidsBefore[2], readyUID, "the Ready etcd-2 was the restarted one")
	require.Equal(t, 3, f.must.Partition(), "partition locked at the end")
	revs, uidsAfter := f.must.Pods()
	assert.Equal(t, readyUID, uidsAfter[2], "etcd-2's pod was deleted while etcd-0 was down: etcd-1 was left alone")
	assert.Equal(t, rev, revs[2], "etcd-2 is still the member on the new revision")
	assert.Equal(t, uidsBefore[:2], uidsAfter[:2], "etcd-0 and etcd-1 were never restarted")
	assert.Nil(t, revertedOf(err), "nothing was reverted")
	assert.Empty(t, res.MembersRolled)
}

// The single-fault variant: no look of ours reaches etcd-2 for its whole etcd gate (every port-forward to it
// fails to open, as when the path from the API server to its node is cut) and nothing else is wrong: the
// kubelet keeps its pod Ready. The engine never reached its etcd, so it knows nothing of the revision: the run
// stops with rollout.ErrMemberUnseen, the partition locked and nothing deleted, and it does not tell the user
// to fix the template. (A client port that refuses us is the member's own answer: that fails the revision,
// TestPointOfNoReturnRefusesTheRevert.)
func TestMemberUnseenForItsWholeGateIsNotBlamedOnTheTemplate(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	f.must.PlaceLeader(1)
	rev := f.must.ChangeTemplate("unseen-for-its-gate")
	_, uidsBefore := f.must.Pods()

	var readyUID types.UID
	res, err := f.engine(func(c *rollout.Config, o *rollout.Options) {
		c.ReadyTimeout, c.HealthTimeout = 20*time.Second, 10*time.Second
		forwards, err := memberdial.NewPortForward(o.RestConfig)
		require.NoError(t, err)
		t.Cleanup(func() { _ = forwards.Close() })
		cut := &cutDialer{Dialer: forwards, pod: "etcd-2"}
		o.Dialer = cut
		log := o.OnEvent
		o.OnEvent = func(e rollout.Event) {
			log(e)
			if readyUID == "" && etcd2Ready(e) {
				ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
				defer cancel()
				pod, err := f.etcd.Pod(ctx, 2)
				require.NoError(t, err)
				readyUID = pod.UID
				cut.cut(f.etcd.Namespace)
			}
		}
	}).Run(runCtx(t))
	t.Logf("run: %v", err)
	require.NotEmpty(t, readyUID, "the run never reported etcd-2 Ready")

	require.ErrorIs(t, err, rollout.ErrMemberUnseen, "a gate that never reached etcd-2's etcd is not the revision's failure")
	assert.NotContains(t, err.Error(), "fix the template")
	assert.Contains(t, err.Error(), "etcd-2")
	assert.Nil(t, revertedOf(err), "nothing was reverted")
	assert.Empty(t, res.MembersRolled)

	require.Equal(t, 3, f.must.Partition(), "partition locked at the end")
	revs, uidsAfter := f.must.Pods()
	assert.Equal(t, readyUID, uidsAfter[2], "etcd-2's pod was deleted")
	assert.Equal(t, rev, revs[2])
	assert.Equal(t, uidsBefore[:2], uidsAfter[:2], "etcd-0 and etcd-1 were never restarted")
}

// cutDialer is the engine's real port-forward Dialer with the path to one member cut once cut is called:
// every forward to it then fails to open, as when the API server cannot reach the member's kubelet.
type cutDialer struct {
	memberdial.Dialer
	pod string
	on  atomic.Bool
}

func (d *cutDialer) cut(namespace string) {
	d.on.Store(true)
	d.Dialer.Release(namespace, d.pod, rollout.DefaultClientPort)
}

func (d *cutDialer) Endpoint(ctx context.Context, namespace, pod string, port int) (string, error) {
	if pod == d.pod && d.on.Load() {
		return "", fmt.Errorf("port-forward to %s/%s: error upgrading connection: the API server cannot reach the node (cut by the test)", namespace, pod)
	}
	return d.Dialer.Endpoint(ctx, namespace, pod, port)
}

// revertedOf is the RevertedError in err's chain, or nil.
func revertedOf(err error) *rollout.RevertedError {
	var reverted *rollout.RevertedError
	if err != nil && errors.As(err, &reverted) {
		return reverted
	}
	return nil
}

// firstFailedPut describes the first put the cluster failed in ops (not one cut short by the recorder's
// stop), for a failure message.
func firstFailedPut(ops []harness.HistoryOp) string {
	for _, op := range ops {
		if op.FailedByCluster() {
			return op.Key + " at +" + op.Call.Round(time.Millisecond).String() + ": " + op.Err
		}
	}
	return "none"
}
