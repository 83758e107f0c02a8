package rollout

import (
	"context"
	"testing"
	"testing/synctest"

	"github.com/stretchr/testify/assert"

	appsv1 "k8s.io/api/apps/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	appsv1client "k8s.io/client-go/kubernetes/typed/apps/v1"
	fakeappsv1 "k8s.io/client-go/kubernetes/typed/apps/v1/fake"
	coordinationv1client "k8s.io/client-go/kubernetes/typed/coordination/v1"
	fakecoordinationv1 "k8s.io/client-go/kubernetes/typed/coordination/v1/fake"
	corev1client "k8s.io/client-go/kubernetes/typed/core/v1"
	fakecorev1 "k8s.io/client-go/kubernetes/typed/core/v1/fake"
)

// client-go's typed fakes drop the context a request is made with, so a deadline would protect nothing in the
// schedules (issue 31's audit: withinLease bounded nothing any test could see). These clients hand the
// request's context to the world with the request, for the pods, StatefulSets and Leases whose requests are the
// engine's disruptions, its lease confirmations and the looks they are decided on; the world refuses a request
// whose context has ended when its turn comes, as client-go does (the request is never sent). The engine's
// other requests (status ConfigMap, Events, ControllerRevisions) go on the background context.

func (k *worldKube) CoreV1() corev1client.CoreV1Interface {
	return ctxCoreV1{CoreV1Interface: &fakecorev1.FakeCoreV1{Fake: k.fake(context.Background())}, k: k}
}
func (k *worldKube) AppsV1() appsv1client.AppsV1Interface {
	return ctxAppsV1{AppsV1Interface: &fakeappsv1.FakeAppsV1{Fake: k.fake(context.Background())}, k: k}
}
func (k *worldKube) CoordinationV1() coordinationv1client.CoordinationV1Interface {
	return ctxCoordinationV1{CoordinationV1Interface: &fakecoordinationv1.FakeCoordinationV1{Fake: k.fake(context.Background())}, k: k}
}

type ctxCoreV1 struct {
	corev1client.CoreV1Interface
	k *worldKube
}

func (c ctxCoreV1) Pods(ns string) corev1client.PodInterface {
	return ctxPods{PodInterface: c.CoreV1Interface.Pods(ns), k: c.k, ns: ns}
}

// ctxPods sends each of the engine's pod requests with its context.
type ctxPods struct {
	corev1client.PodInterface
	k  *worldKube
	ns string
}

func (p ctxPods) on(ctx context.Context) corev1client.PodInterface {
	return (&fakecorev1.FakeCoreV1{Fake: p.k.fake(ctx)}).Pods(p.ns)
}
func (p ctxPods) Get(ctx context.Context, name string, o metav1.GetOptions) (*corev1.Pod, error) {
	return p.on(ctx).Get(ctx, name, o)
}
func (p ctxPods) Delete(ctx context.Context, name string, o metav1.DeleteOptions) error {
	return p.on(ctx).Delete(ctx, name, o)
}
func (p ctxPods) Create(ctx context.Context, pod *corev1.Pod, o metav1.CreateOptions) (*corev1.Pod, error) {
	return p.on(ctx).Create(ctx, pod, o)
}

type ctxAppsV1 struct {
	appsv1client.AppsV1Interface
	k *worldKube
}

func (c ctxAppsV1) StatefulSets(ns string) appsv1client.StatefulSetInterface {
	return ctxStatefulSets{StatefulSetInterface: c.AppsV1Interface.StatefulSets(ns), k: c.k, ns: ns}
}

// ctxStatefulSets sends each of the engine's StatefulSet reads and writes with its context.
type ctxStatefulSets struct {
	appsv1client.StatefulSetInterface
	k  *worldKube
	ns string
}

func (s ctxStatefulSets) on(ctx context.Context) appsv1client.StatefulSetInterface {
	return (&fakeappsv1.FakeAppsV1{Fake: s.k.fake(ctx)}).StatefulSets(s.ns)
}
func (s ctxStatefulSets) Get(ctx context.Context, name string, o metav1.GetOptions) (*appsv1.StatefulSet, error) {
	return s.on(ctx).Get(ctx, name, o)
}
func (s ctxStatefulSets) Patch(ctx context.Context, name string, pt types.PatchType, data []byte, o metav1.PatchOptions, sub ...string) (*appsv1.StatefulSet, error) {
	return s.on(ctx).Patch(ctx, name, pt, data, o, sub...)
}

type ctxCoordinationV1 struct {
	coordinationv1client.CoordinationV1Interface
	k *worldKube
}

func (c ctxCoordinationV1) Leases(ns string) coordinationv1client.LeaseInterface {
	return ctxLeases{LeaseInterface: c.CoordinationV1Interface.Leases(ns), k: c.k, ns: ns}
}

// ctxLeases sends each of the engine's Lease reads and writes with its context: a confirmation on an ended
// context fails like any request.
type ctxLeases struct {
	coordinationv1client.LeaseInterface
	k  *worldKube
	ns string
}

func (l ctxLeases) on(ctx context.Context) coordinationv1client.LeaseInterface {
	return (&fakecoordinationv1.FakeCoordinationV1{Fake: l.k.fake(ctx)}).Leases(l.ns)
}
func (l ctxLeases) Get(ctx context.Context, name string, o metav1.GetOptions) (*coordinationv1.Lease, error) {
	return l.on(ctx).Get(ctx, name, o)
}
func (l ctxLeases) Create(ctx context.Context, lease *coordinationv1.Lease, o metav1.CreateOptions) (*coordinationv1.Lease, error) {
	return l.on(ctx).Create(ctx, lease, o)
}
func (l ctxLeases) Update(ctx context.Context, lease *coordinationv1.Lease, o metav1.UpdateOptions) (*coordinationv1.Lease, error) {
	return l.on(ctx).Update(ctx, lease, o)
}

// TestTheSchedulesClientsSendNothingOnAnEndedContext: a request made on an ended context reaches neither the
// fake API server nor the fake etcd, as with client-go and etcd's client, so a deadline such as withinLease
// protects in the schedules what it protects in production.
func TestTheSchedulesClientsSendNothingOnAnEndedContext(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		w := newWorld(t, schedule{Seed: 1, Members: 3, Leader: 0, Runs: 1})
		se := w.newEngine("run-1", 1)
		ctx, cancel := context.WithCancel(context.Background())
		cancel()

		err := se.e.kube.CoreV1().Pods("db").Delete(ctx, "etcd-2", metav1.DeleteOptions{})
		assert.ErrorIs(t, err, context.Canceled)
		assert.Empty(t, w.c.deletedPods(), "the delete never reached the API server")

		_, err = se.e.kube.AppsV1().StatefulSets("db").Patch(ctx, "etcd", types.MergePatchType,
			[]byte(`{"spec":{"updateStrategy":{"rollingUpdate":{"partition":0}}}}`), metav1.PatchOptions{})
		assert.ErrorIs(t, err, context.Canceled)
		assert.Equal(t, 3, w.c.partition(), "the lowering never reached the API server")

		_, err = se.e.kube.CoordinationV1().Leases("db").Get(ctx, "etcd-etcd-rollout", metav1.GetOptions{})
		assert.ErrorIs(t, err, context.Canceled)

		err = se.e.etcd.MoveLeader(ctx, "etcd-0", w.f.ids["etcd-1"])
		assert.ErrorIs(t, err, context.Canceled)
		assert.Equal(t, "etcd-0", w.f.leaderPod(), "the move never reached etcd")
	})
}
