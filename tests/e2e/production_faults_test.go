//go:build e2e && faults

package e2e

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/utils/ptr"

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
// dies) while the partition is lowered, then docs/usage.md's recovery steps for the file backend and the next up.
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

	// docs/usage.md's recovery steps for the file backend: release the dead run's lock, then up again.
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

// issue 21, item 5: a `pulumi up` stopped by its customTimeouts records an incomplete rollout under the new
// versionHash; the `pulumi up` that resumes it is killed with the partition at 0, so the controller recreates
// etcd-0 on its own and every member ends up updated, the partition lowered, the dead run's Lease held, and
// the program has nothing new to say. The next `pulumi up` must still run the rollout: take the lease over,
// lock the partition, restart nothing, and record the rollout complete. Without a refresh the preview plans
// the takeover and the lock (a plan that only locks); after `pulumi refresh`, which records the lowered
// partition, Pulumi's apply of the StatefulSet locks it, and the Rollout is an update because its state says
// its last run did not complete: that run frees the lease.
func TestFaultsKilledResumeIsFinishedByTheNextUp(t *testing.T) {
	p := repoPaths(t)
	c := harness.Connect(t)
	for _, refresh := range []bool{false, true} {
		t.Run(map[bool]string{false: "up", true: "refresh then up"}[refresh], func(t *testing.T) {
			ctx := t.Context()
			ns := c.Namespace(t)
			rn, config := nodeExample("ts-dropin", false)(t, p, c, ns)
			r := rn.(*procRunner)
			withRolloutUpdateTimeout(t, r)
			res, err := r.up(ctx, config("1"))
			require.NoError(t, err, "first up:\n%s", res.explained())

			// 1. A template change whose rollout is stopped by a 6 s customTimeouts: the engine re-locks, the
			// state keeps versionHash 2 with complete: false.
			stopped := config("2")
			stopped["rolloutUpdateTimeout"] = "6s"
			res, err = r.up(ctx, stopped)
			require.Error(t, err, "an up with a 6 s customTimeouts must stop before its rollout ends:\n%s", res.Text)
			assert.Contains(t, err.Error(), "cancelled", "stopped by its deadline")
			v := viewStatefulSet(ctx, t, c, ns)
			require.Equal(t, v.Replicas, v.Partition, "the stopped run re-locked")
			require.Equal(t, false, stackResources(t, r).one(t, rolloutType).Outputs["complete"], "the stopped up recorded an incomplete rollout")

			// 2. The up that resumes it, killed the moment the partition is 0 (without refresh at once; with
			// refresh once the engine dropped its field-manager claim, so Pulumi's apply does not conflict).
			atZero := watchPartition(ctx, t, c, ns, !refresh, func(partition, _ int32) bool { return partition == 0 })
			// Stack config persists: the resuming up gets a deadline it will not reach (it proves etcd-2, which
			// the stopped up left on the new revision, with the whole stability window before it rolls on).
			resumed := config("2")
			resumed["rolloutUpdateTimeout"] = "10m"
			up, err := r.start("up", resumed)
			require.NoError(t, err)
			select {
			case <-atZero:
			case err := <-up.done:
				up.done <- err
				res, err := up.wait(ctx)
				t.Fatalf("the resumed up ended before it lowered the partition to 0: %v\n%s", err, res.explained())
			case <-time.After(5 * time.Minute):
				_ = up.kill()
				t.Fatal("the resumed up never lowered the partition to 0")
			}
			require.NoError(t, up.kill())
			require.Equal(t, 0, viewStatefulSet(ctx, t, c, ns).Partition, "killed with the partition at 0")

			// The controller recreates etcd-0 on its own: every member updated and healthy, partition 0.
			left := waitAllUpdated(ctx, t, c, ns)
			require.Equal(t, 0, left.Partition)
			e, err := c.AttachEtcd(ns, harness.EtcdSpec{Name: "etcd", ServiceName: "etcd-headless", Replicas: 3})
			require.NoError(t, err)
			require.NoError(t, e.WaitHealthy(ctx), "every member healthy after the kill")
			holder := leaseHolder(ctx, t, c, ns)
			require.NotEmpty(t, holder, "the dead run still holds the Lease")
			uids := podUIDsOf(ctx, t, c, ns, "etcd")

			_, err = r.run(ctx, "cancel", nil)
			require.NoError(t, err, "pulumi cancel")
			takeover := fmt.Sprintf("take over lease %s/etcd-etcd-rollout from %q once it has gone unrenewed for 15s (its run stopped with the partition at 0)", ns, holder)
			if refresh {
				res, err := r.run(ctx, "refresh", nil)
				require.NoError(t, err, "pulumi refresh:\n%s", res.explained())
				st := stackResources(t, r).one(t, rolloutType)
				assert.Equal(t, false, st.Outputs["complete"])
				assert.Equal(t, []any{takeover, "lock partition at 3"}, st.Outputs["plan"], "refresh says what the next up does")
			}

			// 3. The preview says the next up does something, and what.
			pv := previewUntilSettled(ctx, t, r, config("2"))
			steps := pv.rolloutSteps()
			require.Len(t, steps, 1)
			assert.Equal(t, "update", string(steps[0].Op), "the Rollout is an update:\n%s", pv.Text)
			if refresh {
				assert.Contains(t, steps[0].Diffs, "complete", "its state says the last run did not complete")
			} else {
				assert.Equal(t, []string{takeover, "lock partition at 3"}, planOf(steps[0]))
			}

			// 4. The next up takes the lease over, locks, restarts nothing, and frees the lease.
			start := time.Now()
			res, err = r.up(ctx, config("2"))
			require.NoError(t, err, "the up after the kill:\n%s", res.explained())
			t.Logf("the up after the kill took %s:\n%s", time.Since(start).Round(time.Second), tail(res.Text, 30))
			requireRolledAndLocked(t, viewStatefulSet(ctx, t, c, ns))
			assert.Empty(t, leaseHolder(ctx, t, c, ns), "the Lease is free")
			st := stackResources(t, r).one(t, rolloutType)
			assert.Equal(t, true, st.Outputs["complete"], "the rollout is recorded complete")
			assert.Empty(t, st.Outputs["plan"])
			assert.NotEmpty(t, st.Outputs["finishedAt"])
			assert.Equal(t, uids, podUIDsOf(ctx, t, c, ns, "etcd"), "the up restarted nothing")
			assert.Empty(t, res.Outputs["membersRolled"])
			assert.EqualValues(t, 0, res.Outputs["unplannedElections"])
			if !refresh {
				assert.Contains(t, res.Text, "partition left at 0 by "+holder+"; re-locking it before anything else",
					"the re-lock is in the up's diagnostics")
			}
			pv, err = r.preview(ctx, config("2"))
			require.NoError(t, err, "preview after it:\n%s", pv.explained())
			if steps := pv.rolloutSteps(); len(steps) == 1 {
				assert.Equal(t, "same", string(steps[0].Op), "nothing is left: %v", planOf(steps[0]))
			}
			require.NoError(t, r.destroy(ctx))
		})
	}
}

const rolloutType = "etcd-rollout:index:Rollout"

// withRolloutUpdateTimeout gives the copied drop-in program a config key, rolloutUpdateTimeout, that sets
// customTimeouts.update on the component (the example itself stays as users write it).
func withRolloutUpdateTimeout(t *testing.T, r *procRunner) {
	t.Helper()
	file := filepath.Join(r.argv[2], "index.ts")
	b, err := os.ReadFile(file)
	require.NoError(t, err)
	const opts = "}, { provider, parent: sts });"
	require.Equal(t, 1, strings.Count(string(b), opts), "the drop-in call site in %s", file)
	patched := strings.Replace(string(b), opts, `}, { provider, parent: sts, ...(config.get("rolloutUpdateTimeout") ? `+
		`{ customTimeouts: { update: config.get("rolloutUpdateTimeout") } } : {}) });`, 1)
	require.NoError(t, os.WriteFile(file, []byte(patched), 0o644))
}

// waitAllUpdated waits until every pod carries the StatefulSet's updateRevision.
func waitAllUpdated(ctx context.Context, t *testing.T, c *harness.Cluster, ns string) stsView {
	t.Helper()
	deadline := time.Now().Add(3 * time.Minute)
	for {
		v := viewStatefulSet(ctx, t, c, ns)
		done := v.UpdateRevision != ""
		for _, rev := range v.PodRevisions {
			done = done && rev == v.UpdateRevision
		}
		if done {
			return v
		}
		if time.Now().After(deadline) {
			t.Fatalf("the pods did not all reach updateRevision %s: %v", v.UpdateRevision, v.PodRevisions)
		}
		time.Sleep(500 * time.Millisecond)
	}
}

// leaseHolder is the holder the rollout Lease names, "" when it is free.
func leaseHolder(ctx context.Context, t *testing.T, c *harness.Cluster, ns string) string {
	t.Helper()
	lease, err := c.Kube.CoordinationV1().Leases(ns).Get(ctx, "etcd-etcd-rollout", metav1.GetOptions{})
	require.NoError(t, err)
	return ptr.Deref(lease.Spec.HolderIdentity, "")
}

// previewUntilSettled previews until the Rollout's plan waits for no member (a member the controller has just
// recreated may be healthy to the harness a moment before it is to the engine), at most three times.
func previewUntilSettled(ctx context.Context, t *testing.T, r *procRunner, config map[string]string) result {
	t.Helper()
	for i := 0; ; i++ {
		pv, err := r.preview(ctx, config)
		require.NoError(t, err, "preview:\n%s", pv.explained())
		waits := false
		for _, s := range pv.rolloutSteps() {
			for _, line := range planOf(s) {
				waits = waits || strings.HasPrefix(line, "wait for ")
			}
		}
		if !waits || i == 2 {
			return pv
		}
		time.Sleep(3 * time.Second)
	}
}

// watchPartitionLowered starts a watch on the StatefulSet before anything can lower its partition and closes
// the returned channel the moment an event shows it below replicas (with immediately; else once the engine
// also holds no managedFields entry), so the test can kill within milliseconds.
func watchPartitionLowered(ctx context.Context, t *testing.T, c *harness.Cluster, ns string, immediately bool) <-chan struct{} {
	t.Helper()
	return watchPartition(ctx, t, c, ns, immediately, func(partition, replicas int32) bool { return partition < replicas })
}

// watchPartition is watchPartitionLowered for the partition values want accepts.
func watchPartition(ctx context.Context, t *testing.T, c *harness.Cluster, ns string, immediately bool, want func(partition, replicas int32) bool) <-chan struct{} {
	t.Helper()
	w, err := c.Kube.AppsV1().StatefulSets(ns).Watch(ctx, metav1.ListOptions{FieldSelector: fields.OneTermEqualSelector("metadata.name", "etcd").String()})
	require.NoError(t, err)
	seen := make(chan struct{})
	go func() {
		defer w.Stop()
		for ev := range w.ResultChan() {
			sts, ok := ev.Object.(*appsv1.StatefulSet)
			if !ok || ev.Type == watch.Deleted {
				continue
			}
			ru := sts.Spec.UpdateStrategy.RollingUpdate
			if ru != nil && ru.Partition != nil && sts.Spec.Replicas != nil && want(*ru.Partition, *sts.Spec.Replicas) &&
				(immediately || !claimedByEngine(sts)) {
				close(seen)
				return
			}
		}
	}()
	return seen
}

func claimedByEngine(sts *appsv1.StatefulSet) bool {
	for _, m := range sts.ManagedFields {
		if m.Manager == "etcd-rollout" {
			return true
		}
	}
	return false
}
