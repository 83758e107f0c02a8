//go:build faults

package faults_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/etcd-rollout/pulumi-etcd-rollout/rollout"
)

// A rollout runs on a runner whose clock is an hour behind: it renews its Lease every few seconds, but every
// renewTime it writes looks an hour stale to a runner with the right time. A second run must still be refused,
// naming the holder: the Lease is judged by whether it changes, never by comparing the holder's timestamps
// with the local clock. (Before, the second run took the live Lease over and both rolled.)
func TestSkewedClockHolderIsNotTakenOver(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	rev := f.must.ChangeTemplate("")
	_, uidsBefore := f.must.Pods()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	const holder = "etcd-rollout@skewed-runner/4242/0badc10c"
	leases := f.c.Kube.CoordinationV1().Leases(f.etcd.Namespace)
	behind := func() *metav1.MicroTime { t := metav1.NewMicroTime(time.Now().Add(-time.Hour)); return &t }
	_, err := leases.Create(ctx, &coordinationv1.Lease{
		ObjectMeta: metav1.ObjectMeta{Name: rollout.LeaseName(f.etcd.Spec.Name)},
		Spec: coordinationv1.LeaseSpec{HolderIdentity: ptr.To(holder), LeaseDurationSeconds: ptr.To[int32](6),
			AcquireTime: behind(), RenewTime: behind()},
	}, metav1.CreateOptions{})
	require.NoError(t, err)
	renewed := make(chan struct{})
	go func() { // the skewed runner: renews every 2 s, a third of its lease, with its own (wrong) time
		defer close(renewed)
		for ctx.Err() == nil {
			time.Sleep(2 * time.Second)
			if l, err := leases.Get(ctx, rollout.LeaseName(f.etcd.Spec.Name), metav1.GetOptions{}); err == nil {
				l.Spec.RenewTime = behind()
				_, _ = leases.Update(ctx, l, metav1.UpdateOptions{})
			}
		}
	}()

	start := time.Now()
	_, err = f.engine(nil).Run(runCtx(t))
	var locked *rollout.LockedError
	require.ErrorAs(t, err, &locked, "got %v", err)
	assert.Equal(t, holder, locked.Holder, "the refusal names the live holder")
	assert.Less(t, time.Since(start), 6*time.Second, "refused at the holder's first renewal, not after a lease duration")
	cancel()
	<-renewed
	assert.Equal(t, f.etcd.Spec.Replicas, f.must.Partition())
	revs, uidsAfter := f.must.Pods()
	assert.Equal(t, uidsBefore, uidsAfter, "nothing restarted")
	assert.NotContains(t, revs, rev, "no member was rolled")
}
