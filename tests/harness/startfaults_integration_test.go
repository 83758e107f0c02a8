//go:build integration

package harness_test

import (
	"context"
	"fmt"
	"net"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	clientv3 "go.etcd.io/etcd/client/v3"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"

	"github.com/etcd-rollout/pulumi-etcd-rollout/rollout/memberdial"
	"github.com/etcd-rollout/pulumi-etcd-rollout/tests/harness"
	"github.com/etcd-rollout/pulumi-etcd-rollout/tests/harness/memberapi"
)

// sampleEvery calls f every 100 ms until it reports done or ctx ends (an error).
func sampleEvery(ctx context.Context, f func() (done bool)) error {
	for !f() {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
	}
	return nil
}

// podOrNil is the pod of ordinal, nil while it does not exist.
func podOrNil(ctx context.Context, t *testing.T, e *harness.Etcd, ordinal int) *corev1.Pod {
	p, err := e.Pod(ctx, ordinal)
	if apierrors.IsNotFound(err) {
		return nil
	}
	require.NoError(t, err)
	return p
}

func refused(port int) bool {
	conn, err := net.DialTimeout("tcp", fmt.Sprintf("127.0.0.1:%d", port), time.Second)
	if err == nil {
		conn.Close()
	}
	return err != nil
}

// With a start delay every pod stays Pending, with no etcd process, for the delay, then turns Running; the
// OrderedReady controller creates each next pod only once the previous one is Running and Ready, so the
// members come up one delay after another, and then serve.
func TestStartDelayKeepsPodsPending(t *testing.T) {
	t.Parallel() // waits on delays, not on the CPU: overlapping them keeps make test lean
	const delay = 3 * time.Second
	c := harness.Connect(t)
	ns := c.Namespace(t)
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	spec := harness.EtcdSpec{GracePeriod: 5 * time.Second}
	spec.StartDelay = delay
	e, err := c.ApplyEtcd(ctx, ns, spec)
	require.NoError(t, err)

	for i := range e.Spec.Replicas {
		var pod *corev1.Pod
		require.NoError(t, sampleEvery(ctx, func() bool { pod = podOrNil(ctx, t, e, i); return pod != nil }))
		created := time.Now()
		if i > 0 {
			prev, err := e.Pod(ctx, i-1)
			require.NoError(t, err)
			assert.True(t, isReady(prev) && prev.Status.Phase == corev1.PodRunning, "%s created before %s was Running and Ready", pod.Name, prev.Name)
		}
		sawPendingMember := false
		require.NoError(t, sampleEvery(ctx, func() bool {
			p := podOrNil(ctx, t, e, i)
			if p.Status.Phase != corev1.PodPending {
				return true
			}
			assert.False(t, isReady(p), "%s Ready while Pending", p.Name)
			if m, err := e.Member(ctx, i); err == nil && m.State == memberapi.StatePending {
				sawPendingMember = true
				assert.Zero(t, m.PID, "no etcd process during the start delay")
				assert.Equal(t, delay, m.StartDelay)
			}
			return false
		}))
		pending := time.Since(created)
		t.Logf("%s Pending for %s", pod.Name, pending.Round(time.Millisecond))
		assert.True(t, sawPendingMember, "the daemon reported %s as pending", pod.Name)
		assert.GreaterOrEqual(t, pending, delay-300*time.Millisecond, "%s left Pending before its start delay", pod.Name)
		assert.Equal(t, corev1.PodRunning, podOrNil(ctx, t, e, i).Status.Phase)
	}
	require.NoError(t, e.WaitHealthy(ctx))
	cli, err := e.Client(ctx)
	require.NoError(t, err)
	defer cli.Close()
	_, err = cli.Put(ctx, "after-start-delay", "served")
	require.NoError(t, err)
}

// With a serve delay and no readinessProbe the pod is Running and Ready at once while etcd refuses
// connections; etcd serves only after the delay.
func TestServeDelayReadyBeforeServing(t *testing.T) {
	t.Parallel() // waits on delays, not on the CPU: overlapping them keeps make test lean
	const delay = 4 * time.Second
	c := harness.Connect(t)
	ns := c.Namespace(t)
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	spec := harness.EtcdSpec{Replicas: 1, GracePeriod: 5 * time.Second}
	spec.ServeDelay = delay
	e, err := c.ApplyEtcd(ctx, ns, spec)
	require.NoError(t, err)

	require.NoError(t, sampleEvery(ctx, func() bool { p := podOrNil(ctx, t, e, 0); return p != nil && isReady(p) }))
	readyAt := time.Now()
	m, err := e.Member(ctx, 0)
	require.NoError(t, err)
	assert.Equal(t, memberapi.StateLoading, m.State)
	assert.Zero(t, m.PID, "etcd has not started")
	assert.True(t, refused(m.ClientPort), "the client port refuses connections while etcd loads")

	require.NoError(t, sampleEvery(ctx, func() bool {
		if !refused(m.ClientPort) {
			return true
		}
		assert.True(t, isReady(podOrNil(ctx, t, e, 0)), "Ready stays while etcd loads")
		return false
	}))
	loading := time.Since(readyAt)
	t.Logf("Ready %s before etcd accepted connections", loading.Round(time.Millisecond))
	assert.GreaterOrEqual(t, loading, delay-time.Second, "etcd served before its serve delay")
	require.NoError(t, e.WaitHealthy(ctx))
	m, err = e.Member(ctx, 0)
	require.NoError(t, err)
	assert.Equal(t, memberapi.StateRunning, m.State)
	assert.NotZero(t, m.PID)
}

// A template change to a crash-looping revision: once rolled, the member is killed crash-after seconds after
// each start and restarted with a growing back-off, and its pod (no readinessProbe) flaps Ready.
func TestCrashAfterLoopsWithGrowingBackoff(t *testing.T) {
	t.Parallel() // waits on delays, not on the CPU: overlapping them keeps make test lean
	const crashAfter = 3 * time.Second
	c := harness.Connect(t)
	ns := c.Namespace(t)
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	e := c.MustCreateEtcd(t, ns, harness.EtcdSpec{Replicas: 1, GracePeriod: 5 * time.Second})
	old, err := e.Pod(ctx, 0)
	require.NoError(t, err)
	e.Must(t).ChangeStartFaults(harness.StartFaults{CrashAfter: crashAfter})
	require.NoError(t, e.SetPartition(ctx, 0))

	// Follow the new pod's member: each start (a new StartedAt) and each crash (a first sample in state
	// exited), and each change of the pod's Ready condition.
	var starts, crashes []time.Time
	var readyFlips []bool
	var uid types.UID
	require.NoError(t, sampleEvery(ctx, func() bool {
		p := podOrNil(ctx, t, e, 0)
		if p == nil || p.UID == old.UID {
			return false
		}
		m, err := e.Member(ctx, 0)
		require.NoError(t, err)
		if m.PodUID != string(p.UID) && m.State != memberapi.StateExited {
			return false
		}
		uid = p.UID
		if m.State == memberapi.StateRunning && (len(starts) == 0 || m.StartedAt.After(starts[len(starts)-1])) {
			starts = append(starts, m.StartedAt)
		}
		if m.State == memberapi.StateExited && len(crashes) < len(starts) {
			crashes = append(crashes, time.Now())
			assert.Contains(t, m.LastExit, "crash-after 3s")
		}
		if r := isReady(p); len(readyFlips) == 0 || readyFlips[len(readyFlips)-1] != r {
			readyFlips = append(readyFlips, r)
		}
		return len(starts) == 3
	}))
	t.Logf("pod %s: starts %v, crashes %v, Ready %v", uid, starts, crashes, readyFlips)
	require.Len(t, crashes, 2)
	for i, crash := range crashes {
		assert.InDelta(t, crashAfter.Seconds(), crash.Sub(starts[i]).Seconds(), 0.7, "crash %d came crash-after after its start", i)
	}
	first, second := starts[1].Sub(crashes[0]), starts[2].Sub(crashes[1])
	t.Logf("back-off before restart 1: %s, before restart 2: %s", first.Round(time.Millisecond), second.Round(time.Millisecond))
	assert.GreaterOrEqual(t, first, 700*time.Millisecond, "restarted without back-off")
	assert.Greater(t, second, first+500*time.Millisecond, "the back-off grows")
	assert.GreaterOrEqual(t, len(readyFlips), 4, "Ready flaps with each crash and start: %v", readyFlips)
}

// A template change that adds a serve delay to a pod with a readinessProbe: once rolled, the new pod is
// Running but not Ready while etcd loads, and Ready only once /readyz answers.
func TestServeDelayWithProbeWaitsForReadyz(t *testing.T) {
	t.Parallel() // waits on delays, not on the CPU: overlapping them keeps make test lean
	const delay = 3 * time.Second
	c := harness.Connect(t)
	ns := c.Namespace(t)
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	e := c.MustCreateEtcd(t, ns, harness.EtcdSpec{Replicas: 1, Readiness: memberapi.ReadyOnProbe, GracePeriod: 5 * time.Second})
	old, err := e.Pod(ctx, 0)
	require.NoError(t, err)
	e.Must(t).ChangeStartFaults(harness.StartFaults{ServeDelay: delay})
	require.NoError(t, e.SetPartition(ctx, 0))

	var running time.Time
	sawLoading := false
	require.NoError(t, sampleEvery(ctx, func() bool {
		p := podOrNil(ctx, t, e, 0)
		if p == nil || p.UID == old.UID || p.Status.Phase != corev1.PodRunning {
			return false
		}
		if running.IsZero() {
			running = time.Now()
		}
		if m, err := e.Member(ctx, 0); err == nil && m.PodUID == string(p.UID) && m.State == memberapi.StateLoading {
			sawLoading = true
			assert.False(t, isReady(p), "Ready while etcd loads")
		}
		return isReady(p)
	}))
	notReady := time.Since(running)
	t.Logf("new pod Running and not Ready for %s", notReady.Round(time.Millisecond))
	assert.True(t, sawLoading, "the daemon reported the member loading")
	assert.GreaterOrEqual(t, notReady, delay-time.Second, "Ready before etcd served")
	require.NoError(t, e.WaitHealthy(ctx))
}

// A member whose client port refuses connections (clients-refused, on ordinal 1 only) is still a voting
// member — it applies the log and can even lead — yet answers nothing on its client port, neither through
// a port-forward (the engine's path) nor to etcdctl in `kubectl exec`; the other pods of the same revision
// serve normally, so the refusal is the fault and not the path.
func TestClientsRefusedMemberVotesButAnswersNoClient(t *testing.T) {
	t.Parallel()
	spec := harness.EtcdSpec{GracePeriod: 5 * time.Second}
	spec.ClientsRefused = true
	spec.Ordinals = []int{1}
	c, e := createEtcd(t, spec)
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()

	for i := range e.Spec.Replicas {
		m, err := e.Member(ctx, i)
		require.NoError(t, err)
		assert.Equal(t, i == 1, m.ClientsRefused, "%s: clients refused only on the listed ordinal", m.Pod)
	}

	dialer, err := memberdial.NewPortForward(c.Config)
	require.NoError(t, err)
	defer dialer.Close()
	for i := range e.Spec.Replicas {
		hostport, err := dialer.Endpoint(ctx, e.Namespace, e.PodName(i), memberapi.DefaultClientPort)
		require.NoError(t, err)
		cli, err := e.NewClient(hostport)
		require.NoError(t, err)
		sctx, scancel := context.WithTimeout(ctx, 5*time.Second)
		_, err = cli.Status(sctx, hostport)
		scancel()
		require.NoError(t, cli.Close())
		if i == 1 {
			assert.Error(t, err, "%s answered through a port-forward", e.PodName(i))
		} else {
			assert.NoError(t, err, "%s through a port-forward", e.PodName(i))
		}
	}
	_, _, err = e.Exec(ctx, 1, "etcdctl", "--dial-timeout=2s", "--command-timeout=3s", "endpoint", "health")
	assert.Error(t, err, "etcdctl in kubectl exec reached a member whose client port refuses")
	out, _, err := e.Exec(ctx, 0, "etcdctl", "--dial-timeout=2s", "--command-timeout=3s", "endpoint", "health")
	require.NoError(t, err)
	assert.Contains(t, out, "is healthy")

	// Through Raft it is a full member: a voter in the member list, it applies what the others write, and
	// it can take the leadership (raft never hands it to a learner).
	cli, err := e.Client(ctx, 0, 2)
	require.NoError(t, err)
	defer cli.Close()
	list, err := cli.MemberList(ctx)
	require.NoError(t, err)
	voter := false
	for _, m := range list.Members {
		voter = voter || (m.Name == e.PodName(1) && !m.IsLearner)
	}
	assert.True(t, voter, "%s is a voting member: %v", e.PodName(1), list.Members)
	put, err := cli.Put(ctx, "clients-refused", "applied")
	require.NoError(t, err)
	behind, err := e.Client(ctx, 1) // the harness dials the member itself, behind the refusing port
	require.NoError(t, err)
	defer behind.Close()
	require.Eventually(t, func() bool {
		got, err := behind.Get(ctx, "clients-refused", clientv3.WithSerializable()) // from its own store
		return err == nil && len(got.Kvs) == 1 && got.Kvs[0].ModRevision == put.Header.Revision
	}, 10*time.Second, 100*time.Millisecond, "%s applies the log", e.PodName(1))
	require.NoError(t, e.MoveLeader(ctx, 1))
	_, err = cli.Put(ctx, "clients-refused", "led")
	require.NoError(t, err, "writes go on with the refusing member as leader")
}
