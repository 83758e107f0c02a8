// Package memberwatchtest builds the API servers and watches the tests of memberwatch and of the engine start
// from.
package memberwatchtest

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/utils/ptr"

	"github.com/etcd-rollout/pulumi-etcd-rollout/rollout/internal/memberwatch"
	"github.com/etcd-rollout/pulumi-etcd-rollout/rollout/internal/planner/plannertest"
)

var statefulSets = appsv1.SchemeGroupVersion.WithResource("statefulsets")

// Stuck bounds how long a test waits for something that must happen promptly (a watch event on a fake
// clientset); it is a failure bound, not a speed claim.
const Stuck = 10 * time.Second

// WatchedCluster is an API server holding StatefulSet etcd (generation 1, partition 3) with pods etcd-0 and
// etcd-1 under its selector, and one pod of something else.
func WatchedCluster() (*fake.Clientset, *appsv1.StatefulSet) {
	sts := &appsv1.StatefulSet{
		ObjectMeta: metav1.ObjectMeta{Name: "etcd", Namespace: "db", UID: "sts-uid", Generation: 1},
		Spec: appsv1.StatefulSetSpec{Replicas: ptr.To(int32(3)), Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "etcd"}},
			UpdateStrategy: appsv1.StatefulSetUpdateStrategy{Type: appsv1.RollingUpdateStatefulSetStrategyType,
				RollingUpdate: &appsv1.RollingUpdateStatefulSetStrategy{Partition: ptr.To(int32(3))}}},
		Status: appsv1.StatefulSetStatus{ObservedGeneration: 1, UpdateRevision: plannertest.NewRev, CurrentRevision: plannertest.OldRev},
	}
	pod := func(name, app string) *corev1.Pod {
		return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "db", UID: types.UID("uid-" + name),
			Labels: map[string]string{"app": app, appsv1.ControllerRevisionHashLabelKey: plannertest.OldRev}}}
	}
	return fake.NewClientset(sts, pod("etcd-0", "etcd"), pod("etcd-1", "etcd"), pod("other-0", "other")), sts
}

// StartedWatch is a watch of db/etcd on kube, started and synced, closed when t ends.
func StartedWatch(t *testing.T, kube *fake.Clientset, sts *appsv1.StatefulSet) *memberwatch.Watch {
	w := memberwatch.New(kube, "db", "etcd")
	w.Start(sts)
	t.Cleanup(w.Close)
	require.Eventually(t, w.Ready, Stuck, time.Millisecond, "the watch never synced")
	return w
}

// UpdateStatefulSet changes the StatefulSet on the API server as a writer would, raising the generation.
func UpdateStatefulSet(t *testing.T, kube *fake.Clientset, partition int32, generation int64) {
	obj, err := kube.Tracker().Get(statefulSets, "db", "etcd")
	require.NoError(t, err)
	sts := obj.(*appsv1.StatefulSet).DeepCopy()
	sts.Spec.UpdateStrategy.RollingUpdate.Partition = ptr.To(partition)
	sts.Generation, sts.Status.ObservedGeneration = generation, generation
	require.NoError(t, kube.Tracker().Update(statefulSets, sts, "db"))
}

// StatefulSetGets counts the GETs of the StatefulSet kube was asked for.
func StatefulSetGets(kube *fake.Clientset) int {
	n := 0
	for _, a := range kube.Actions() {
		if a.GetVerb() == "get" && a.GetResource().Resource == "statefulsets" {
			n++
		}
	}
	return n
}
