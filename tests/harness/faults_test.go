//go:build integration

package harness_test

import (
	"context"
	"os"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/etcd-rollout/pulumi-etcd-rollout/tests/harness"
	"github.com/etcd-rollout/pulumi-etcd-rollout/tests/harness/memberapi"
)

// The fault hooks do what they say, on a probe-mode cluster (so a frozen member also loses its Ready).
func TestFaultHooks(t *testing.T) {
	c, e := createEtcd(t, harness.EtcdSpec{Readiness: memberapi.ReadyOnProbe, GracePeriod: 3 * time.Second})
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()

	t.Run("leader placement", func(t *testing.T) {
		for _, o := range []int{2, 0} {
			require.NoError(t, e.MoveLeader(ctx, o))
			leader, _, err := e.Leader(ctx)
			require.NoError(t, err)
			assert.Equal(t, o, leader)
		}
	})

	t.Run("metrics and logs", func(t *testing.T) {
		changes, err := e.LeaderChanges(ctx, 0)
		require.NoError(t, err)
		assert.GreaterOrEqual(t, changes, 1.0, "the first election is seen")
		log, err := e.LogFile(ctx, 0)
		require.NoError(t, err)
		info, err := os.Stat(log)
		require.NoError(t, err)
		assert.Positive(t, info.Size())
		_, term, err := e.Leader(ctx)
		require.NoError(t, err)
		assert.Positive(t, term)
	})

	t.Run("crash restarts the member", func(t *testing.T) {
		before, err := e.Member(ctx, 0)
		require.NoError(t, err)
		require.NoError(t, e.Crash(ctx, 0))
		require.NoError(t, wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
			m, err := e.Member(ctx, 0)
			return err == nil && m.Starts == before.Starts+1 && m.State == memberapi.StateRunning, nil
		}))
		after, err := e.Member(ctx, 0)
		require.NoError(t, err)
		assert.NotEqual(t, before.PID, after.PID)
		assert.Contains(t, after.LastExit, "killed")
		assert.Equal(t, before.PodUID, after.PodUID, "the pod stays; only its container restarted")
		require.NoError(t, e.WaitHealthy(ctx))
	})

	t.Run("a frozen member loses its readiness", func(t *testing.T) {
		require.NoError(t, e.Freeze(ctx, 1))
		m, err := e.Member(ctx, 1)
		require.NoError(t, err)
		assert.Equal(t, memberapi.StateStopped, m.State)
		assert.NoError(t, waitPodReady(ctx, c, e, 1, false), "probe mode: /readyz stops answering")
		require.NoError(t, e.Thaw(ctx, 1))
		assert.NoError(t, waitPodReady(ctx, c, e, 1, true))
		require.NoError(t, e.WaitHealthy(ctx))
	})

	t.Run("hang on term lasts the grace period", func(t *testing.T) {
		require.NoError(t, e.HangOnTerm(ctx, 2, true))
		old, err := e.Pod(ctx, 2)
		require.NoError(t, err)
		start := time.Now()
		require.NoError(t, c.Kube.CoreV1().Pods(e.Namespace).Delete(ctx, old.Name, metav1.DeleteOptions{}))
		_, err = e.WaitPodRecreated(ctx, 2, old.UID)
		require.NoError(t, err)
		took := time.Since(start)
		t.Logf("hung member replaced after %s (grace 3s)", took.Round(time.Millisecond))
		assert.GreaterOrEqual(t, took, 3*time.Second, "the new pod waits for the old process to be killed")
		m, err := e.Member(ctx, 2)
		require.NoError(t, err)
		assert.Contains(t, m.LastExit, "killed")
		assert.False(t, m.HangOnTerm, "the hook held for the old process only")
		require.NoError(t, e.WaitHealthy(ctx))
	})
}

// A template can roll a real version upgrade, and a broken revision never turns Ready.
func TestVersionAndBrokenRevisions(t *testing.T) {
	_, e := createEtcd(t, harness.EtcdSpec{Version: "3.5", GracePeriod: 5 * time.Second})
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	st, err := e.Status(ctx, 2)
	require.NoError(t, err)
	assert.Regexp(t, `^3\.5\.`, st.Version)

	old, err := e.Pod(ctx, 2)
	require.NoError(t, err)
	_, err = e.SetTemplateAnnotation(ctx, memberapi.AnnotationVersion, "3.6")
	require.NoError(t, err)
	require.NoError(t, e.SetPartition(ctx, 2))
	_, err = e.WaitPodRecreated(ctx, 2, old.UID)
	require.NoError(t, err)
	require.NoError(t, e.WaitHealthy(ctx))
	st, err = e.Status(ctx, 2)
	require.NoError(t, err)
	assert.Regexp(t, `^3\.6\.`, st.Version, "etcd-2 runs the new version")

	// With the partition still at 2, the broken revision recreates etcd-2 alone.
	old, err = e.Pod(ctx, 2)
	require.NoError(t, err)
	_, err = e.SetTemplateAnnotation(ctx, memberapi.AnnotationBroken, "true")
	require.NoError(t, err)
	var first memberapi.Member
	require.NoError(t, wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		first, err = e.Member(ctx, 2)
		return err == nil && first.Broken && first.State == memberapi.StateExited, nil
	}))
	assert.Contains(t, first.LastExit, "exit status")
	pod2, err := e.Pod(ctx, 2)
	require.NoError(t, err)
	assert.NotEqual(t, old.UID, pod2.UID, "etcd-2 was recreated at the broken revision")
	// Like a container without a readinessProbe that crashes at once, the pod may flash Ready for a few
	// milliseconds after each start (enough for the StatefulSet controller to move on, as in a real
	// cluster); the member itself never serves, and it is restarted with back-off.
	assert.Never(t, func() bool {
		_, err := e.Status(ctx, 2)
		return err == nil
	}, 3*time.Second, 200*time.Millisecond, "a broken member never answers")
	last, err := e.Member(ctx, 2)
	require.NoError(t, err)
	assert.Greater(t, last.Starts, first.Starts, "the broken member is restarted, crash-looping")
}

func isReady(p *corev1.Pod) bool {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

func waitPodReady(ctx context.Context, c *harness.Cluster, e *harness.Etcd, ordinal int, ready bool) error {
	return wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 20*time.Second, true, func(ctx context.Context) (bool, error) {
		p, err := e.Pod(ctx, ordinal)
		return err == nil && isReady(p) == ready, nil
	})
}
