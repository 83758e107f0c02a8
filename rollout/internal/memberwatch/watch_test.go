package memberwatch_test

import (
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	k8stesting "k8s.io/client-go/testing"

	"github.com/etcd-rollout/pulumi-etcd-rollout/rollout/internal/memberwatch"
	"github.com/etcd-rollout/pulumi-etcd-rollout/rollout/internal/memberwatch/memberwatchtest"
)

func TestWatchAnswersFromItsCache(t *testing.T) {
	kube, sts := memberwatchtest.WatchedCluster()
	w := memberwatchtest.StartedWatch(t, kube, sts)

	got, ok := w.StatefulSet(1)
	require.True(t, ok)
	assert.Equal(t, int32(3), *got.Spec.UpdateStrategy.RollingUpdate.Partition)
	_, ok = w.StatefulSet(2)
	assert.False(t, ok, "a cache that has not seen generation 2 cannot answer for it")

	pod, exists, ok := w.Pod("etcd-1")
	require.True(t, ok)
	require.True(t, exists)
	assert.Equal(t, "uid-etcd-1", string(pod.UID))
	_, exists, ok = w.Pod("etcd-2")
	assert.True(t, ok, "the cache knows etcd-2 does not exist")
	assert.False(t, exists)
	_, exists, _ = w.Pod("other-0")
	assert.False(t, exists, "pods outside the StatefulSet's selector are not watched")
	_, found := w.LookupPod("elsewhere", "etcd-0")
	assert.False(t, found, "another namespace is not the watch's to answer")

	event := w.Changes()
	memberwatchtest.UpdateStatefulSet(t, kube, 1, 2)
	select {
	case <-event:
	case <-time.After(memberwatchtest.Stuck):
		t.Fatal("no event woke the waiter")
	}
	require.Eventually(t, func() bool { _, ok := w.StatefulSet(2); return ok }, memberwatchtest.Stuck, time.Millisecond)

	w.Close()
	_, ok = w.StatefulSet(0)
	assert.False(t, ok, "a closed watch answers nothing")
}

// An API server that refuses list (a Role that grants only get) stops the watch for good: readers GET, and
// the refusal is reported once.
func TestWatchRefusedLeavesReadsToGets(t *testing.T) {
	kube, sts := memberwatchtest.WatchedCluster()
	kube.PrependReactor("list", "pods", func(k8stesting.Action) (bool, runtime.Object, error) {
		return true, nil, apierrors.NewForbidden(corev1.Resource("pods"), "", errors.New(`User "ci" cannot list resource "pods"`))
	})
	w := memberwatch.New(kube, "db", "etcd")
	w.Start(sts)
	t.Cleanup(w.Close)

	var refused error
	require.Eventually(t, func() bool { refused = w.Refusal(); return refused != nil }, memberwatchtest.Stuck, time.Millisecond)
	assert.True(t, apierrors.IsForbidden(refused))
	assert.NoError(t, w.Refusal(), "reported once")
	assert.False(t, w.Ready())
	_, _, ok := w.Pod("etcd-0")
	assert.False(t, ok)
}

// client-go re-opens a watch that ended (the API server went away) by itself and tells nobody; until a new
// stream delivers, the cache may miss changes, so readers must not trust it.
func TestWatchIsSuspectFromAStreamEndUntilTheNextDelivers(t *testing.T) {
	kube, sts := memberwatchtest.WatchedCluster()
	streams := make(chan *watch.FakeWatcher, 10)
	kube.PrependWatchReactor("statefulsets", func(k8stesting.Action) (bool, watch.Interface, error) {
		fw := watch.NewFake()
		streams <- fw
		return true, fw, nil
	})
	w := memberwatchtest.StartedWatch(t, kube, sts)
	first := <-streams

	first.Stop()
	require.Eventually(t, func() bool { return !w.Ready() }, memberwatchtest.Stuck, time.Millisecond, "a stream that ended makes the cache suspect")
	_, ok := w.StatefulSet(0)
	assert.False(t, ok)

	var next *watch.FakeWatcher
	select {
	case next = <-streams:
	case <-time.After(memberwatchtest.Stuck):
		t.Fatal("the watch was never opened again")
	}
	assert.False(t, w.Ready(), "a new stream that delivered nothing yet proves nothing")
	changed := sts.DeepCopy()
	changed.Generation = 2
	next.Modify(changed)
	require.Eventually(t, func() bool { _, ok := w.StatefulSet(2); return ok }, memberwatchtest.Stuck, time.Millisecond,
		"trusted again once the new stream delivers")
}
