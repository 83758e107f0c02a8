//go:build e2e && faults

package e2e

import (
	"context"
	"fmt"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/watch"

	"github.com/etcd-rollout/pulumi-etcd-rollout/tests/harness"
)

// The first `pulumi up` of a new stack whose members start late (an image pull, a volume attach: each pod
// Pending for 20 s, with OrderedReady so the cluster takes a minute to form) succeeds, and so does its
// preview: the engine waits for the leader and the missing pods, bounded by readyTimeoutSeconds, as the old
// Job did, instead of calling the StatefulSet broken on its first look.
func TestFaultsFirstUpWithLateMembers(t *testing.T) {
	p := repoPaths(t)
	c := harness.Connect(t)
	ctx := t.Context()
	ns := c.Namespace(t)
	r, config := nodeExample("ts-dropin", false)(t, p, c, ns)
	cfg := config("1")
	cfg["podAnnotations"] = `{"etcd-rollout.test/start-delay": "20"}`

	pv, err := r.preview(ctx, cfg)
	require.NoError(t, err, "preview of the new stack:\n%s", pv.explained())
	res, err := r.up(ctx, cfg)
	require.NoError(t, err, "first up with members that start 20 s late:\n%s", res.explained())
	requireRolledAndLocked(t, viewStatefulSet(ctx, t, c, ns))
	assert.Empty(t, res.Outputs["membersRolled"], "a new cluster is created by the controller, not rolled")

	// The members really did start late: every pod sat Pending for most of its delay before it ran, so
	// the up had to wait for them (the harness is not instant here).
	for i := range 3 {
		pod, err := c.Kube.CoreV1().Pods(ns).Get(ctx, fmt.Sprintf("etcd-%d", i), metav1.GetOptions{})
		require.NoError(t, err)
		require.NotNil(t, pod.Status.StartTime, "etcd-%d has started", i)
		pending := pod.Status.StartTime.Sub(pod.CreationTimestamp.Time)
		assert.GreaterOrEqual(t, pending, 15*time.Second, "etcd-%d was Pending for its start delay", i)
	}
	e, err := c.AttachEtcd(ns, harness.EtcdSpec{Name: "etcd", ServiceName: "etcd-headless", Replicas: 3})
	require.NoError(t, err)
	require.NoError(t, e.WaitHealthy(ctx), "every member healthy after the first up")

	pv, err = r.preview(ctx, cfg)
	require.NoError(t, err, "preview after the first up:\n%s", pv.explained())
	require.NoError(t, r.destroy(ctx))
}

// killCycle is one `pulumi up` SIGKILLed (the CLI and every provider process at once, as when a CI runner
// dies) while the partition is lowered, then README's recovery steps for the file backend and the next up.
type killCycle struct {
	// newTemplate: the next up brings yet another template (else the killed run's template again).
	newTemplate bool
	// refresh: `pulumi refresh` runs before the next up (it records the lowered partition in the state).
	refresh bool
	// rightAfterWrite kills within milliseconds of the partition write, before the engine has dropped its
	// field-manager claim (the next request): only the owned StatefulSet's pulumi.com/patchForce makes
	// the next apply succeed then. Otherwise the kill lands once the claim is gone, as any kill later in
	// the window would.
	rightAfterWrite bool
}

// A `pulumi up` killed mid-roll is resumed by the next `pulumi up`, after `pulumi cancel` (the file backend
// keeps the dead run's lock) and, in two of the cycles, `pulumi refresh`: every member at updateRevision
// and healthy, the partition locked, the member the dead run had restarted not restarted again. Each
// shape runs the two combinations the other does not, so together they cover same/new template, with and
// without refresh, in the drop-in and the owned-StatefulSet shapes.
func TestFaultsKilledUpResumes(t *testing.T) {
	p := repoPaths(t)
	c := harness.Connect(t)
	shapes := []struct {
		name, example string
		cycles        []killCycle
	}{
		{name: "drop-in", example: "ts-dropin", cycles: []killCycle{{}, {newTemplate: true, refresh: true}}},
		{name: "owned StatefulSet", example: "ts-managed", cycles: []killCycle{{refresh: true, rightAfterWrite: true}, {newTemplate: true, rightAfterWrite: true}}},
	}
	for _, shape := range shapes {
		t.Run(shape.name, func(t *testing.T) {
			ctx := t.Context()
			ns := c.Namespace(t)
			r, config := nodeExample(shape.example, false)(t, p, c, ns)
			res, err := r.up(ctx, config("1"))
			require.NoError(t, err, "first up:\n%s", res.explained())
			rev := 2
			for _, cyc := range shape.cycles {
				t.Logf("cycle %+v: killing the up of template %d", cyc, rev)
				rev = killAndResume(ctx, t, c, ns, r.(*procRunner), config, rev, cyc)
			}
			require.NoError(t, r.destroy(ctx))
		})
	}
}

// killAndResume runs one killCycle from template rev and returns the next unused template number.
func killAndResume(ctx context.Context, t *testing.T, c *harness.Cluster, ns string, r *procRunner,
	config func(string) map[string]string, rev int, cyc killCycle) int {
	t.Helper()
	lowered := watchPartitionLowered(ctx, t, c, ns, cyc.rightAfterWrite)
	up, err := r.start("up", config(strconv.Itoa(rev)))
	require.NoError(t, err)
	select {
	case <-lowered:
	case err := <-up.done:
		up.done <- err
		res, err := up.wait(ctx)
		t.Fatalf("the up ended before it lowered the partition: %v\n%s", err, res.explained())
	case <-time.After(5 * time.Minute):
		_ = up.kill()
		t.Fatal("the up never lowered the partition")
	}
	loweredAt := time.Now()
	require.NoError(t, up.kill())
	t.Logf("killed %s after the partition was seen lowered", time.Since(loweredAt).Round(time.Millisecond))
	killed := viewStatefulSet(ctx, t, c, ns)
	require.Less(t, killed.Partition, killed.Replicas, "the kill landed while the partition was lowered (the state this test is about)")
	sts, err := c.Kube.AppsV1().StatefulSets(ns).Get(ctx, "etcd", metav1.GetOptions{})
	require.NoError(t, err)
	t.Logf("killed with the partition at %d of %d; the engine's field-manager claim %s", killed.Partition, killed.Replicas,
		map[bool]string{true: "was still there", false: "was already dropped"}[claimedByEngine(sts)])

	// README's recovery steps for the file backend: release the dead run's lock, then up again.
	_, err = r.run(ctx, "cancel", nil)
	require.NoError(t, err, "pulumi cancel")
	if cyc.refresh {
		res, err := r.run(ctx, "refresh", nil)
		require.NoError(t, err, "pulumi refresh:\n%s", res.explained())
	}
	next := rev
	if cyc.newTemplate {
		next = rev + 1
	}
	res, err := r.up(ctx, config(strconv.Itoa(next)))
	require.NoError(t, err, "the up after the kill:\n%s", res.explained())
	t.Logf("the up after the kill:\n%s", res.Text)
	after := viewStatefulSet(ctx, t, c, ns)
	requireRolledAndLocked(t, after)
	e, err := c.AttachEtcd(ns, harness.EtcdSpec{Name: "etcd", ServiceName: "etcd-headless", Replicas: 3})
	require.NoError(t, err)
	require.NoError(t, e.WaitHealthy(ctx), "every member healthy")
	assert.EqualValues(t, 0, res.Outputs["unplannedElections"])
	if !cyc.newTemplate {
		// etcd-2 was restarted by the dead run (the controller recreated it at updateRevision once the
		// partition was 2): the next run waits for it but does not restart it again.
		assert.Equal(t, []any{"etcd-1", "etcd-0"}, res.Outputs["membersRolled"], "the rest, not etcd-2 again")
	} else {
		assert.NotEqual(t, killed.UpdateRevision, after.UpdateRevision, "rolled to the newer template")
		assert.Equal(t, []any{"etcd-2", "etcd-1", "etcd-0"}, res.Outputs["membersRolled"])
	}
	return next + 1
}

// watchPartitionLowered starts a watch on the StatefulSet before anything can lower its partition and closes
// the returned channel the moment an event shows it below replicas (with immediately; else once the engine
// also holds no managedFields entry), so the test can kill within milliseconds.
func watchPartitionLowered(ctx context.Context, t *testing.T, c *harness.Cluster, ns string, immediately bool) <-chan struct{} {
	t.Helper()
	w, err := c.Kube.AppsV1().StatefulSets(ns).Watch(ctx, metav1.ListOptions{FieldSelector: fields.OneTermEqualSelector("metadata.name", "etcd").String()})
	require.NoError(t, err)
	lowered := make(chan struct{})
	go func() {
		defer w.Stop()
		for ev := range w.ResultChan() {
			sts, ok := ev.Object.(*appsv1.StatefulSet)
			if !ok || ev.Type == watch.Deleted {
				continue
			}
			ru := sts.Spec.UpdateStrategy.RollingUpdate
			if ru != nil && ru.Partition != nil && sts.Spec.Replicas != nil && *ru.Partition < *sts.Spec.Replicas &&
				(immediately || !claimedByEngine(sts)) {
				close(lowered)
				return
			}
		}
	}()
	return lowered
}

func claimedByEngine(sts *appsv1.StatefulSet) bool {
	for _, m := range sts.ManagedFields {
		if m.Manager == "etcd-rollout" {
			return true
		}
	}
	return false
}
