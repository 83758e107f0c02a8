package rollout

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	k8stesting "k8s.io/client-go/testing"

	"github.com/etcd-rollout/pulumi-etcd-rollout/rollout/internal/health"
	"github.com/etcd-rollout/pulumi-etcd-rollout/rollout/internal/member"
	"github.com/etcd-rollout/pulumi-etcd-rollout/rollout/internal/planner"
)

// The tests of this file are the rules the schedule checker found once its API server could be slow: requests
// that land late, watches that lag by seconds, contexts that end while a request is on its way (issue 31,
// item 4). Each fails without its rule.

// newSlowAPIRun is a run on c as the executor makes one, before its first look.
func newSlowAPIRun(t *testing.T, c *fakeCluster) *run {
	e := c.engine(t, nil)
	lease, err := e.lease.Acquire(context.Background()) // the gate confirms it before every disruption
	require.NoError(t, err)
	return &run{e: e, lease: lease, passed: map[int]*passedMember{}, unproven: map[int]*passedMember{},
		downAfterPass: map[string]bool{}, res: &Result{}}
}

// The partition is lowered for a member only when the API server itself has every pod above it on the update
// revision: the run's look comes from a watch that can lag, and a pod someone else replaced onto the old
// revision meanwhile would be restarted with it (seeds 603, 2570 and 4802 of 10,000 with a lagging watch).
func TestALoweringIsRefusedWhenTheAPIServerHasAnotherPodToUpdate(t *testing.T) {
	for _, tt := range []struct {
		name  string
		setup func(t *testing.T, c *fakeCluster)
		want  string
	}{
		{name: "every pod above at the update revision", setup: func(*testing.T, *fakeCluster) {}},
		{name: "one put back on the old revision", setup: func(t *testing.T, c *fakeCluster) { c.setPodRevision(t, 2, oldRev) },
			want: "etcd-2 runs revision etcd-old, not etcd-new"},
		{name: "one gone", setup: func(t *testing.T, c *fakeCluster) {
			require.NoError(t, c.kube.Tracker().Delete(podGVR, "db", "etcd-2"))
		}, want: "etcd-2 has no pod"},
		{name: "one the API server cannot be asked for", setup: func(_ *testing.T, c *fakeCluster) {
			c.kube.PrependReactor("get", "pods", func(k8stesting.Action) (bool, runtime.Object, error) {
				return true, nil, apierrors.NewServiceUnavailable("away")
			})
		}, want: "etcd-2 could not be read"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			c := newFakeCluster(t, 3, 0, 2)
			r := newSlowAPIRun(t, c)
			inc, err := c.etcd.Incarnation(context.Background(), "etcd-2")
			require.NoError(t, err)
			r.passed[2] = r.newPassed(context.Background(), "etcd-2", passage{incarnation: inc}, false) // rolled by this run
			st := healthyState(3, 0, 2)                                                                 // the run's look: etcd-2 at the update revision
			tt.setup(t, c)
			_, clear, err := r.clearToDisrupt(context.Background(), st, Step{Kind: StepLowerPartition, Ordinal: 1})
			require.NoError(t, err)
			assert.Equal(t, tt.want == "", clear)
			if tt.want != "" {
				assert.Contains(t, r.e.sts.OthersExposedBy(context.Background(), 1, 3, newRev), tt.want)
			}
		})
	}
}

// A gate passes only on a pod the API server still has: the watch may still show one someone else replaced
// just before the pass (seed 788 of 10,000 with a lagging watch: a pod put back on the old revision proved
// the new one).
func TestAGatePassesOnlyOnAPodTheAPIServerStillHas(t *testing.T) {
	c := newFakeCluster(t, 3, 0)
	e := c.engine(t, nil)
	live, err := c.kube.CoreV1().Pods("db").Get(context.Background(), "etcd-2", metav1.GetOptions{})
	require.NoError(t, err)

	broke, pending, err := e.sts.ConfirmWitness(context.Background(), "etcd-2", &health.PodWitness{UID: string(live.UID)})
	assert.NoError(t, err)
	assert.Empty(t, pending)
	assert.Empty(t, broke)

	_, _, err = e.sts.ConfirmWitness(context.Background(), "etcd-2", &health.PodWitness{UID: "a-pod-replaced-since"})
	assert.ErrorIs(t, err, ErrReplacedMidGate)

	c.kube.PrependReactor("get", "pods", func(k8stesting.Action) (bool, runtime.Object, error) {
		return true, nil, apierrors.NewServiceUnavailable("away")
	})
	_, pending, err = e.sts.ConfirmWitness(context.Background(), "etcd-2", &health.PodWitness{UID: "a-pod-replaced-since"})
	assert.NoError(t, err, "an unanswered read is no verdict")
	assert.Contains(t, pending, "confirming its pod with the API server")
}

// A gate passes only on a process the kubelet did not restart since the gate saw the pod Ready: etcd's process
// start time cannot tell a restart exactly a second after the last start from its own jitter, so two
// incarnations a second apart read as one (review 3, item 11), but the container's restart count, read from
// the API server at the pass, does not lie. Here the watch has not seen the restart yet.
func TestAGatePassesOnlyOnAContainerThatDidNotRestart(t *testing.T) {
	c := newFakeCluster(t, 3, 0)
	e := c.engine(t, nil)
	live, err := c.kube.CoreV1().Pods("db").Get(context.Background(), "etcd-2", metav1.GetOptions{})
	require.NoError(t, err)
	witness := &health.PodWitness{Seen: true, UID: string(live.UID), Restarts: health.ContainerRestarts(live)}
	c.containerRestarted("etcd-2")
	broke, pending, err := e.sts.ConfirmWitness(context.Background(), "etcd-2", witness)
	require.NoError(t, err)
	assert.Empty(t, pending)
	assert.Equal(t, "its container restarted (1 restarts, 0 before)", broke)

	one, other := member.IncarnationStartedAt(time.Unix(100, 0)), member.IncarnationStartedAt(time.Unix(101, 0))
	assert.True(t, one.Same(other), "what etcd says of its process cannot tell these two apart: the kubelet must")
}

// A run whose context ends while it asks whether someone else replaced a member's pod does not fail the member:
// the answer that could clear it never came (seed 4336 of 10,000, once the fakes honoured contexts: a cancelled
// run blamed a member whose pod someone else had replaced).
func TestAMemberIsNotFailedOnAnAnswerThatNeverCame(t *testing.T) {
	c := newFakeCluster(t, 3, 0)
	r := newSlowAPIRun(t, c)
	r.passed[2] = r.newPassed(context.Background(), "etcd-2", passage{incarnation: fakeProcess(0)}, false)
	c.etcd.down["etcd-2"] = true
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	holding, err := r.stillUp(ctx, 2, r.passed[2], true)
	assert.False(t, holding)
	assert.NoError(t, err, "a look the caller cancelled is no verdict: the caller's wait says it ended")

	ctx, cancel = context.WithCancel(context.Background())
	c.kube.PrependReactor("get", "pods", func(k8stesting.Action) (bool, runtime.Object, error) {
		cancel() // the run is stopped while it asks the API server
		return true, nil, context.Canceled
	})
	_, err = r.stillUp(ctx, 2, r.passed[2], true)
	var gate *GateTimeoutError
	assert.False(t, errors.As(err, &gate), "not the member's failure: %v", err)
	assert.ErrorIs(t, err, context.Canceled)
}

// A member the run saw pass whose pass stopped counting (another member on its revision failed) and that a
// later look finds down is not reported rolled (seed 5111 of 10,000).
func TestAMemberWhosePassStoppedCountingIsNotReportedRolledOnceSeenDown(t *testing.T) {
	c := newFakeCluster(t, 3, 0)
	r := newSlowAPIRun(t, c)
	r.unproven[0] = &passedMember{oneLook: true}
	r.sawDown("etcd-0")
	assert.True(t, r.downAfterPass["etcd-0"])
}

// A member that passed, answers a health look and then refuses the read of its process is down between two
// looks (a crash loop): its failure, not a member held for as unseen.
func TestAPassedMemberThatRefusesRightAfterAnsweringFailed(t *testing.T) {
	c := newFakeCluster(t, 3, 0)
	r := newSlowAPIRun(t, c)
	r.passed[2] = r.newPassed(context.Background(), "etcd-2", passage{incarnation: fakeProcess(0)}, false)
	c.etcd.down["etcd-2"] = true
	holding, err := r.sameProcess(context.Background(), 2, r.passed[2])
	assert.False(t, holding)
	var gate *GateTimeoutError
	require.ErrorAs(t, err, &gate)
	assert.Equal(t, "etcd-2", gate.Pod)
}

// A wait for a member another run left on the update revision starts only when the API server has its pod
// there: a plan from a lagging watch would wait for a revision that never comes and blame it (seed 13629 of
// 100,000: a pod put back on the old revision by someone else).
func TestAWaitForALeftoverLooksAgainWhenTheAPIServerHasItsPodOnTheOldRevision(t *testing.T) {
	c := newFakeCluster(t, 3, 0, 2)
	c.setPodRevision(t, 2, oldRev) // the API server's word; the run's look below still has it at the update revision
	r := &run{e: c.engine(t, func(cfg *Config, _ *Options) { cfg.ReadyTimeout = 300 * time.Millisecond }),
		passed: map[int]*passedMember{}, unproven: map[int]*passedMember{}, downAfterPass: map[string]bool{}, res: &Result{}}
	err := r.step(context.Background(), healthyState(3, 0, 2), Step{Kind: StepWaitMember, Ordinal: 2})
	require.NoError(t, err, "no verdict on the revision: the run looks again")
	assert.Equal(t, 1, r.retries)
	assert.Empty(t, c.deletedPods())
}

// A revert deletes nothing while a member this run saw pass, and then saw down, is on the failed revision too,
// however well it answers the revert's watch: a crash loop slower than the window passes a watch in an up
// phase (seeds 12841 and 25572 of 100,000).
func TestARevertRefusesWhileAMemberThisRunSawDownAfterItsPassIsOnTheRevision(t *testing.T) {
	c := newFakeCluster(t, 5, 0, 4, 3)
	r := newSlowAPIRun(t, c)
	r.passed[4] = &passedMember{}
	r.downAfterPass["etcd-4"] = true
	st := healthyState(5, 0, 4, 3)
	_, err := r.othersOnTheFailedRevisionStayUp(context.Background(), st, 3, Step{Kind: StepRecreate, Ordinal: 3}, "reverting etcd-3")
	require.ErrorIs(t, err, ErrBlocked)
	assert.Contains(t, err.Error(), "etcd-4, also on revision etcd-new, did not stay up since it passed (a look after it passed found it down)")
}

// A replacement does not disrupt its member while another member a rollout put on its revision (the update
// revision, or one a template since replaced) is down: one disrupted at a time (seed 32635 of 100,000).
func TestAnotherRolledMemberDown(t *testing.T) {
	st := healthyState(5, 0, 4, 3)
	assert.Nil(t, planner.AnotherRolledMemberDown(st, 4), "every member up")
	st.Members[2].Healthy = false
	assert.Nil(t, planner.AnotherRolledMemberDown(st, 4), "down on the current revision: no rollout's doing")
	st.Members[3].Healthy, st.Members[3].Revision = false, "etcd-rev-before"
	require.NotNil(t, planner.AnotherRolledMemberDown(st, 4), "down on a revision a template since replaced")
	assert.Equal(t, "etcd-3", planner.AnotherRolledMemberDown(st, 4).Pod)
	st.Members[3].Unseen = true
	assert.Nil(t, planner.AnotherRolledMemberDown(st, 4), "one no look reaches is left to the quorum rule")
}

// A member a revert watches that is down by its own answer at any look of the watch, before a healthy stretch
// began too, is flapping: it should be up (seed 99795 of 100,000).
func TestAWatchedMemberDownAtItsFirstLookFlapped(t *testing.T) {
	c := newFakeCluster(t, 3, 0)
	e := c.engine(t, func(cfg *Config, o *Options) { cfg.HealthTimeout, o.StableFor = time.Second, 50*time.Millisecond })
	looks := 0
	c.etcd.beforeStatus = func(pod string) {
		if pod == "etcd-2" {
			looks++
			c.etcd.down["etcd-2"] = looks == 1 // down at the first look, up from then on
		}
	}
	_, _, err := e.staysUp(context.Background(), healthyState(3, 0), 2)
	assert.ErrorIs(t, err, errFlapped)
}
