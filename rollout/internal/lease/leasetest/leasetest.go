// Package leasetest fakes what the lease's tests and the engine's need of the API server's Leases: versioned
// writes, a holder that renews, a clock that never waits.
package leasetest

import (
	"errors"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
	"k8s.io/utils/ptr"
)

// LeaseName is the Lease of StatefulSet db/etcd (lease.Name("etcd"); this package cannot import lease, whose
// own tests use it).
const LeaseName = "etcd-etcd-rollout"

// StepClock is a lease.Clock that never waits: After moves its time on at once, so a lease watched for its
// whole duration costs no real time.
type StepClock struct {
	mu    sync.Mutex
	start time.Time
	now   time.Time
}

// NewStepClock is a StepClock at the present time.
func NewStepClock() *StepClock {
	now := time.Now()
	return &StepClock{start: now, now: now}
}

func (c *StepClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *StepClock) After(d time.Duration) <-chan time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
	ch := make(chan time.Time, 1)
	ch <- c.now
	return ch
}

// Waited is how much time has passed on the clock.
func (c *StepClock) Waited() time.Duration {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now.Sub(c.start)
}

// Resource is the Leases resource of the fake clientset's tracker.
var Resource = coordinationv1.SchemeGroupVersion.WithResource("leases")

// Versioned makes the fake API server's Leases behave like the real one's: every write gets a new
// resourceVersion, and an update carrying an old one fails with a conflict.
func Versioned(kube *fake.Clientset) {
	var version atomic.Int64
	next := func() string { return strconv.FormatInt(version.Add(1), 10) }
	kube.PrependReactor("create", "leases", func(a k8stesting.Action) (bool, runtime.Object, error) {
		lease := a.(k8stesting.CreateAction).GetObject().(*coordinationv1.Lease).DeepCopy()
		lease.ResourceVersion = next()
		if err := kube.Tracker().Create(Resource, lease, a.GetNamespace()); err != nil {
			return true, nil, err
		}
		return true, lease, nil
	})
	kube.PrependReactor("update", "leases", func(a k8stesting.Action) (bool, runtime.Object, error) {
		lease := a.(k8stesting.UpdateAction).GetObject().(*coordinationv1.Lease).DeepCopy()
		cur, err := kube.Tracker().Get(Resource, a.GetNamespace(), lease.Name)
		if err != nil {
			return true, nil, err
		}
		if cur.(*coordinationv1.Lease).ResourceVersion != lease.ResourceVersion {
			return true, nil, apierrors.NewConflict(Resource.GroupResource(), lease.Name,
				errors.New("the object has been modified; please apply your changes to the latest version and try again"))
		}
		lease.ResourceVersion = next()
		if err := kube.Tracker().Update(Resource, lease, a.GetNamespace()); err != nil {
			return true, nil, err
		}
		return true, lease, nil
	})
}

// Held is a Lease of StatefulSet db/etcd held by holder, last renewed at renewed by the holder's clock.
func Held(holder string, renewed time.Time) *coordinationv1.Lease {
	return &coordinationv1.Lease{
		ObjectMeta: metav1.ObjectMeta{Name: LeaseName, Namespace: "db"},
		Spec: coordinationv1.LeaseSpec{HolderIdentity: ptr.To(holder), LeaseDurationSeconds: ptr.To(int32(15)),
			RenewTime: ptr.To(metav1.NewMicroTime(renewed)), AcquireTime: ptr.To(metav1.NewMicroTime(renewed))},
	}
}

// LiveHolder renews db/etcd's Lease every third of its duration as clk counts time, as a run that holds it
// does, writing renewTime from its own clock, skew away from clk. The renewal happens when the Lease is read.
func LiveHolder(kube *fake.Clientset, clk interface{ Now() time.Time }, skew time.Duration) {
	last := clk.Now()
	kube.PrependReactor("get", "leases", func(a k8stesting.Action) (bool, runtime.Object, error) {
		obj, err := kube.Tracker().Get(Resource, a.GetNamespace(), LeaseName)
		if err != nil {
			return false, nil, nil
		}
		lease := obj.(*coordinationv1.Lease).DeepCopy()
		every := time.Duration(ptr.Deref(lease.Spec.LeaseDurationSeconds, 0)) * time.Second / 3
		if now := clk.Now(); now.Sub(last) >= every {
			last = now
			lease.Spec.RenewTime = ptr.To(metav1.NewMicroTime(now.Add(skew)))
			if err := kube.Tracker().Update(Resource, lease, a.GetNamespace()); err != nil {
				return true, nil, err
			}
		}
		return false, nil, nil
	})
}
