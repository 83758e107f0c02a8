package rollout

import (
	"context"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	coordinationv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	k8stesting "k8s.io/client-go/testing"
	"k8s.io/utils/ptr"

	"github.com/etcd-rollout/pulumi-etcd-rollout/rollout/internal/lease"
	"github.com/etcd-rollout/pulumi-etcd-rollout/rollout/internal/lease/leasetest"
)

// An API server that is away for longer than the lease (a restart) must not end the run: nobody can take
// the lease over meanwhile, and the run confirms the lease before it lowers the partition again.
func TestRunRidesOutAnAPIServerAwayLongerThanTheLease(t *testing.T) {
	c := newFakeCluster(t, 3, 0)
	var away atomic.Bool
	unreachable := func(k8stesting.Action) (bool, runtime.Object, error) {
		if away.Load() {
			return true, nil, apierrors.NewServiceUnavailable("the API server is restarting")
		}
		return false, nil, nil
	}
	c.kube.PrependReactor("get", "leases", unreachable)
	c.kube.PrependReactor("update", "leases", unreachable)
	var once sync.Once
	e := c.engine(t, func(cfg *Config, o *Options) {
		// Longer than half the lease: the next member's confirm must renew, so it has to wait out the outage.
		cfg.Cooldown = 200 * time.Millisecond
		o.LeaseDuration = 300 * time.Millisecond
		o.OnEvent = func(ev Event) {
			if strings.HasPrefix(ev.Message, "partition lowered to 2") {
				once.Do(func() { away.Store(true) })
				time.AfterFunc(time.Second, func() { away.Store(false) }) // three lease durations
			}
		}
	})
	res, err := e.Run(context.Background())
	require.NoError(t, err)
	assert.Equal(t, []string{"etcd-2", "etcd-1", "etcd-0"}, res.MembersRolled)
	assert.Equal(t, 3, c.partition())
}

// LeaseHolder is for display: it reads the holder's timestamps as they are, skew and all.
func TestLeaseHolderEstimate(t *testing.T) {
	tests := []struct {
		name      string
		renewed   time.Duration // from now, by the holder's clock
		wantFresh bool
	}{
		{"renewed just now", 0, true},
		{"renewed a minute ago", -time.Minute, false},
		{"holder's clock an hour ahead", time.Hour, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := newFakeCluster(t, 3, 0)
			_, err := c.kube.CoordinationV1().Leases("db").Create(context.Background(), leasetest.Held("ci-runner-7", time.Now().Add(tt.renewed)), metav1.CreateOptions{})
			require.NoError(t, err)
			holder, expiresIn, err := c.engine(t, nil).LeaseHolder(context.Background())
			require.NoError(t, err)
			assert.Equal(t, "ci-runner-7", holder)
			assert.Equal(t, tt.wantFresh, expiresIn > 0)
		})
	}
}

// A run confirms its lease right before it lowers the partition: after renewals that failed for more than half
// the lease (the API server refused Lease updates), another run took the lease over, and the lowering must not
// happen although the renewal loop has not noticed yet. Without the confirm the run restarts etcd-1 on a lease
// it no longer holds (issue 31's audit: this mutation survived every test). Virtual time, so the etcd gate's
// stability window can outlast half the lease.
func TestTheLoweringConfirmsTheLeaseFirst(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := newFakeCluster(t, 3, 0)
		var refuseRenewals atomic.Bool
		c.kube.PrependReactor("update", "leases", func(k8stesting.Action) (bool, runtime.Object, error) {
			if refuseRenewals.Load() {
				return true, nil, apierrors.NewServiceUnavailable("the API server is restarting")
			}
			return false, nil, nil
		})
		e := c.engine(t, func(cfg *Config, o *Options) {
			o.LeaseDuration, o.StableFor = 4*time.Second, 3*time.Second // the gate outlasts half the lease
			cfg.ReadyTimeout, cfg.HealthTimeout = 30*time.Second, 30*time.Second
			o.OnEvent = func(ev Event) {
				switch {
				case ev.Kind == EventMemberReady && ev.Pod == "etcd-2":
					refuseRenewals.Store(true)
				case ev.Kind == EventMemberRestarting && ev.Pod == "etcd-1":
					holdLeaseFor(t, c, "another-run") // taken over while the renewals failed
					refuseRenewals.Store(false)
				}
			}
		})
		_, err := e.Run(context.Background())
		require.ErrorIs(t, err, ErrLeaseLost)
		assert.Contains(t, err.Error(), "not lowering the partition")
		assert.Equal(t, []string{"etcd-2"}, c.restarted, "etcd-1 is not restarted on a lease another run holds")
	})
}

// holdLeaseFor makes holder the holder of the rollout Lease, as another run's takeover would.
func holdLeaseFor(t *testing.T, c *fakeCluster, holder string) {
	obj, err := c.kube.Tracker().Get(leasetest.Resource, "db", lease.Name("etcd"))
	require.NoError(t, err)
	lease := obj.(*coordinationv1.Lease).DeepCopy()
	lease.Spec.HolderIdentity = ptr.To(holder)
	require.NoError(t, c.kube.Tracker().Update(leasetest.Resource, lease, "db"))
}
