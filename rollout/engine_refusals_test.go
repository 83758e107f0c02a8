package rollout

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"

	"github.com/etcd-rollout/pulumi-etcd-rollout/rollout/internal/planner"
)

// The engine refuses a template flag the target version does not accept before its first disruption (the
// CLI has no Check; a preview may have judged an older template): nothing restarts, the leader stays, the
// StatefulSet is not written, and the error names the flag and the version.
func TestRunRefusesAFlagTheTargetDoesNotAcceptBeforeTouchingAnything(t *testing.T) {
	c := newFakeCluster(t, 3, 2)
	c.setImages("registry.k8s.io/etcd:3.5.35-0", "registry.k8s.io/etcd:3.5.35-0") // a flag change, no version change
	c.etcd.serverVersions = map[string]string{"etcd-0": "3.5.35", "etcd-1": "3.5.35", "etcd-2": "3.5.35"}
	obj, err := c.kube.Tracker().Get(stsGVR, "db", "etcd")
	require.NoError(t, err)
	sts := obj.(*appsv1.StatefulSet).DeepCopy()
	sts.Spec.Template.Spec.Containers[0].Args = []string{"--name=$(POD_NAME)", "--feature-gates=InitialCorruptCheck=true"}
	require.NoError(t, c.kube.Tracker().Update(stsGVR, sts, "db"))

	res, err := c.engine(t, nil).Run(context.Background())
	require.ErrorIs(t, err, ErrFlagRefused)
	require.ErrorIs(t, err, ErrBlocked)
	assert.Contains(t, err.Error(), "etcd 3.5 does not accept --feature-gates")
	assert.Empty(t, res.MembersRolled)
	assert.Zero(t, res.LeaderTransfers)
	assert.Zero(t, c.stsPatches())
	assert.Equal(t, []string{oldRev, oldRev, oldRev}, c.revisions())
}

// A learner no replacement of this rollout added is refused at once, not after the ready timeout: etcd never
// promotes one by itself, and the run has no step that would (issue 34, item 1).
func TestARunRefusesALearnerLeftBehindAtOnce(t *testing.T) {
	c := newFakeCluster(t, 3, 1)
	c.etcd.learner = map[string]bool{"etcd-0": true}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	_, err := c.engine(t, func(cfg *Config, _ *Options) { cfg.ReadyTimeout = time.Hour }).Run(ctx)
	require.ErrorIs(t, err, ErrLearnerLeftBehind)
	require.ErrorIs(t, err, ErrBlocked, "nothing changed")
	require.NoError(t, ctx.Err(), "refused at once, not after waiting")
	assert.Contains(t, err.Error(), "promote it once it has caught up (etcdctl member promote) or remove it")
	assert.Zero(t, c.stsPatches())
	assert.Zero(t, c.etcd.moves)
}

// A one-member etcd is refused at once, not after the ready timeout: waiting cannot give it a quorum without
// it (issue 34; before, the run waited out its whole ready timeout, 5 minutes by default).
func TestARunRefusesASingleMemberAtOnce(t *testing.T) {
	// Without Config.AcceptWriteOutage: TestAOneMemberEtcdRollsOnlyWithConsentAndASnapshotFirst has it.
	c := newFakeCluster(t, 1, 0)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	res, err := c.engine(t, func(cfg *Config, _ *Options) { cfg.ReadyTimeout = time.Hour }).Run(ctx)
	require.ErrorIs(t, err, ErrSingleMember)
	require.NoError(t, ctx.Err(), "refused at once, not after waiting")
	assert.Contains(t, err.Error(), "etcd-0 is the only member, so restarting it stops every read and write until it is back")
	assert.Empty(t, res.MembersRolled)
	assert.Zero(t, c.stsPatches())
	assert.Zero(t, c.etcd.moves)
}

// A learner is no healthy voter: it answers, reads linearizably and keeps up, but it has no vote, so a restart
// or a remove that counts it toward the quorum leaves too few voters (review 3's mutation: observeMember's
// learner case could go and no test failed).
func TestALearnerIsNoHealthyVoter(t *testing.T) {
	c := newFakeCluster(t, 3, 0)
	c.etcd.learner["etcd-1"] = true
	st, err := c.engine(t, nil).Observe(context.Background())
	require.NoError(t, err)
	m := st.Members[1]
	assert.True(t, m.Reachable, "it answers")
	assert.False(t, m.Healthy, "but it does not vote")
	assert.Equal(t, ProblemNotVoting, m.Reason)
	err = planner.CheckQuorum(st, 2, false)
	require.ErrorIs(t, err, ErrBlocked, "etcd-0 alone is no quorum of 3")
	assert.Contains(t, err.Error(), "would leave 1 healthy member(s), quorum is 2 of 3")
}
