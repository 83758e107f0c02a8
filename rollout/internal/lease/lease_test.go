package lease

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	coordinationv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/fake"
	coordinationv1client "k8s.io/client-go/kubernetes/typed/coordination/v1"
	k8stesting "k8s.io/client-go/testing"
	"k8s.io/utils/ptr"

	"github.com/etcd-rollout/pulumi-etcd-rollout/rollout/internal/lease/leasetest"
)

// The fakes name the Lease the lease package names.
func TestTheFakesNameTheLease(t *testing.T) {
	assert.Equal(t, Name("etcd"), leasetest.LeaseName)
}

func TestLeaseConfirm(t *testing.T) {
	tests := []struct {
		name      string
		holder    string
		renewed   time.Duration // ago, as this process remembers it
		wantErr   error
		wantWrite bool
	}{
		{"renewed recently: no API call", "me", 0, nil, false},
		{"stale and still ours: renewed now", "me", time.Minute, nil, true},
		{"stale and taken over meanwhile: lost", "thief", time.Minute, ErrLost, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			kube := fake.NewClientset(&coordinationv1.Lease{
				ObjectMeta: metav1.ObjectMeta{Name: Name("etcd"), Namespace: "db"},
				Spec:       coordinationv1.LeaseSpec{HolderIdentity: ptr.To(tt.holder), LeaseDurationSeconds: ptr.To(int32(15))},
			})
			l := &Lease{Kube: kube, Namespace: "db", Name: Name("etcd"), Holder: "me", Duration: 15 * time.Second,
				renewed: time.Now().Add(-tt.renewed)}
			err := l.Confirm(context.Background())
			if tt.wantErr != nil {
				require.ErrorIs(t, err, tt.wantErr)
				assert.Contains(t, err.Error(), `now held by "thief"`)
			} else {
				require.NoError(t, err)
			}
			writes := 0
			for _, a := range kube.Actions() {
				if a.GetVerb() == "update" {
					writes++
				}
			}
			assert.Equal(t, tt.wantWrite, writes > 0)
		})
	}
}

func TestLeaseAcquire(t *testing.T) {
	const leaseDuration = 15 * time.Second // what heldLease records
	now := time.Now()
	tests := []struct {
		name string
		// lease is what is there before acquire (nil: nothing); renewing makes its holder a live one
		// whose clock is skew away from ours.
		lease    *coordinationv1.Lease
		renewing bool
		skew     time.Duration
		// wantHolder is who holds the Lease afterwards; wantRefused says acquire returned a *LockedError
		// naming it.
		wantHolder   string
		wantRefused  bool
		wantTookOver string
		// waited bounds the time acquire watched, on its own clock.
		minWait, maxWait time.Duration
	}{
		{name: "no lease: created at once", wantHolder: "me"},
		{name: "released lease: taken at once", lease: leasetest.Held("", now.Add(-time.Minute)), wantHolder: "me"},
		{name: "this run's own lease: taken again at once", lease: leasetest.Held("me", now), wantHolder: "me"},
		{name: "live holder, same clock: refused within a third of the duration",
			lease: leasetest.Held("ci-runner-7", now), renewing: true,
			wantHolder: "ci-runner-7", wantRefused: true, maxWait: leaseDuration/3 + time.Second},
		{name: "live holder, clock an hour behind ours: refused, not taken over",
			lease: leasetest.Held("ci-runner-7", now.Add(-time.Hour)), renewing: true, skew: -time.Hour,
			wantHolder: "ci-runner-7", wantRefused: true, maxWait: leaseDuration/3 + time.Second},
		{name: "live holder, clock an hour ahead of ours: refused",
			lease: leasetest.Held("ci-runner-7", now.Add(time.Hour)), renewing: true, skew: time.Hour,
			wantHolder: "ci-runner-7", wantRefused: true, maxWait: leaseDuration/3 + time.Second},
		{name: "dead holder, renewed just before it died: taken over after the duration",
			lease:      leasetest.Held("killed-run", now),
			wantHolder: "me", wantTookOver: "killed-run", minWait: leaseDuration, maxWait: leaseDuration},
		{name: "dead holder whose renewTime says it expired an hour ago: still watched for the duration",
			lease:      leasetest.Held("killed-run", now.Add(-time.Hour)),
			wantHolder: "me", wantTookOver: "killed-run", minWait: leaseDuration, maxWait: leaseDuration},
		{name: "dead holder whose clock ran an hour ahead: taken over after the duration, not in an hour",
			lease:      leasetest.Held("killed-run", now.Add(time.Hour)),
			wantHolder: "me", wantTookOver: "killed-run", minWait: leaseDuration, maxWait: leaseDuration},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ctx := context.Background()
			kube := fake.NewClientset()
			leasetest.Versioned(kube)
			clk := leasetest.NewStepClock()
			if tt.lease != nil {
				_, err := kube.CoordinationV1().Leases("db").Create(ctx, tt.lease, metav1.CreateOptions{})
				require.NoError(t, err)
			}
			if tt.renewing {
				leasetest.LiveHolder(kube, clk, tt.skew)
			}
			l := &Lease{Kube: kube, Namespace: "db", Name: Name("etcd"), Holder: "me", Duration: 3 * time.Second, Clock: clk}
			var watched []string
			l.Watching = func(holder string, upTo time.Duration) { watched = append(watched, holder+" for "+upTo.String()) }

			state, err := l.Acquire(ctx)

			if tt.wantRefused {
				var locked *LockedError
				require.ErrorAs(t, err, &locked)
				assert.Equal(t, tt.wantHolder, locked.Holder)
				assert.Contains(t, err.Error(), "another rollout holds lease db/etcd-etcd-rollout: "+tt.wantHolder)
			} else {
				require.NoError(t, err)
				assert.Equal(t, tt.wantTookOver, state.TookOverFrom)
			}
			before := ""
			if tt.lease != nil {
				before = ptr.Deref(tt.lease.Spec.HolderIdentity, "")
			}
			if before != "" && before != "me" {
				assert.Equal(t, []string{before + " for 15s"}, watched, "says once whom it watches, for how long at most")
			} else {
				assert.Empty(t, watched)
			}
			assert.GreaterOrEqual(t, clk.Waited(), tt.minWait, "watched at least")
			assert.LessOrEqual(t, clk.Waited(), tt.maxWait, "watched at most")
			lease, err := kube.CoordinationV1().Leases("db").Get(ctx, Name("etcd"), metav1.GetOptions{})
			require.NoError(t, err)
			assert.Equal(t, tt.wantHolder, ptr.Deref(lease.Spec.HolderIdentity, ""))
			if tt.wantHolder == "me" {
				assert.Equal(t, int32(3), ptr.Deref(lease.Spec.LeaseDurationSeconds, 0), "our own duration")
			}
		})
	}
}

// A lease that someone else writes between this run's read and its write has a live holder: refused at
// once, naming it, without a takeover.
func TestLeaseAcquireLosesToAWriterInBetween(t *testing.T) {
	tests := []struct {
		name  string
		lease *coordinationv1.Lease // before; nil: none
		verb  string                // the write of ours that the other run beats
	}{
		{"both create it", nil, "create"},
		{"both take a released one", leasetest.Held("", time.Now()), "update"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ctx := context.Background()
			kube := fake.NewClientset()
			leasetest.Versioned(kube)
			if tt.lease != nil {
				_, err := kube.CoordinationV1().Leases("db").Create(ctx, tt.lease, metav1.CreateOptions{})
				require.NoError(t, err)
			}
			var once sync.Once
			kube.PrependReactor(tt.verb, "leases", func(a k8stesting.Action) (bool, runtime.Object, error) {
				var err error
				handled := false
				once.Do(func() {
					handled = true
					other := leasetest.Held("other-run", time.Now())
					if tt.verb == "create" {
						err = kube.Tracker().Create(leasetest.Resource, other, "db")
						if err == nil {
							err = apierrors.NewAlreadyExists(leasetest.Resource.GroupResource(), other.Name)
						}
						return
					}
					err = kube.Tracker().Update(leasetest.Resource, other, "db")
					if err == nil {
						err = apierrors.NewConflict(leasetest.Resource.GroupResource(), other.Name, errors.New("the object has been modified"))
					}
				})
				return handled, nil, err
			})
			clk := leasetest.NewStepClock()
			l := &Lease{Kube: kube, Namespace: "db", Name: Name("etcd"), Holder: "me", Duration: 15 * time.Second, Clock: clk}
			_, err := l.Acquire(ctx)
			var locked *LockedError
			require.ErrorAs(t, err, &locked)
			assert.Equal(t, "other-run", locked.Holder)
			assert.Zero(t, clk.Waited(), "refused at once")
		})
	}
}

// Two runs watch the same dead holder's lease and both try to take it over, each having read it before
// either writes: the takeover is conditional on what was read, so exactly one wins, and the other is
// refused naming the winner.
func TestLeaseAcquireRacingTakeoversExactlyOneWins(t *testing.T) {
	ctx := context.Background()
	kube := fake.NewClientset()
	leasetest.Versioned(kube)
	_, err := kube.CoordinationV1().Leases("db").Create(ctx, leasetest.Held("killed-run", time.Now()), metav1.CreateOptions{})
	require.NoError(t, err)
	racers := []string{"run-a", "run-b"}
	var bothRead sync.WaitGroup
	bothRead.Add(len(racers))
	states := make([]State, len(racers))
	errs := make([]error, len(racers))
	var wg sync.WaitGroup
	for r, holder := range racers {
		l := &Lease{Kube: writesTogether(kube, &bothRead), Namespace: "db", Name: Name("etcd"), Holder: holder,
			Duration: 15 * time.Second, Clock: leasetest.NewStepClock()}
		wg.Add(1)
		go func() { defer wg.Done(); states[r], errs[r] = l.Acquire(ctx) }()
	}
	wg.Wait()

	winner, loser := 0, 1
	if errs[0] != nil {
		winner, loser = 1, 0
	}
	require.NoError(t, errs[winner])
	assert.Equal(t, "killed-run", states[winner].TookOverFrom)
	var locked *LockedError
	require.ErrorAs(t, errs[loser], &locked, "both took the lease over")
	assert.Equal(t, racers[winner], locked.Holder)
	lease, err := kube.CoordinationV1().Leases("db").Get(ctx, Name("etcd"), metav1.GetOptions{})
	require.NoError(t, err)
	assert.Equal(t, racers[winner], ptr.Deref(lease.Spec.HolderIdentity, ""))
	assert.Equal(t, int32(1), ptr.Deref(lease.Spec.LeaseTransitions, 0), "one takeover")
}

// writesTogether is kube for one of several racers: its first Lease update waits until every racer has
// reached its own, so all of them write what they read before anyone's write lands.
func writesTogether(kube kubernetes.Interface, all *sync.WaitGroup) kubernetes.Interface {
	return togetherKube{Interface: kube, once: &sync.Once{}, all: all}
}

type togetherKube struct {
	kubernetes.Interface
	once *sync.Once
	all  *sync.WaitGroup
}

func (k togetherKube) CoordinationV1() coordinationv1client.CoordinationV1Interface {
	return togetherCoordination{CoordinationV1Interface: k.Interface.CoordinationV1(), k: k}
}

type togetherCoordination struct {
	coordinationv1client.CoordinationV1Interface
	k togetherKube
}

func (c togetherCoordination) Leases(ns string) coordinationv1client.LeaseInterface {
	return togetherLeases{LeaseInterface: c.CoordinationV1Interface.Leases(ns), k: c.k}
}

type togetherLeases struct {
	coordinationv1client.LeaseInterface
	k togetherKube
}

func (l togetherLeases) Update(ctx context.Context, lease *coordinationv1.Lease, opts metav1.UpdateOptions) (*coordinationv1.Lease, error) {
	l.k.once.Do(func() { l.k.all.Done(); l.k.all.Wait() })
	return l.LeaseInterface.Update(ctx, lease, opts)
}

// A run cancelled while it watches a held lease stops watching and says what it was waiting for.
func TestLeaseAcquireCancelledWhileWatching(t *testing.T) {
	kube := fake.NewClientset(leasetest.Held("ci-runner-7", time.Now()))
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	l := &Lease{Kube: kube, Namespace: "db", Name: Name("etcd"), Holder: "me", Duration: 15 * time.Second}
	_, err := l.Acquire(ctx)
	require.ErrorIs(t, err, context.Canceled)
	assert.Contains(t, err.Error(), "watching lease db/etcd-etcd-rollout (held by ci-runner-7) for a renewal")
}

// The Lease records a duration no shorter than the one this run bounds its writes by: another run takes it
// over after watching it unrenewed for the recorded seconds, and a duration rounded down would let that land
// before this run's last write (issue 31's audit 3d: --lease-duration 1.5s was recorded as 1).
func TestTheLeaseRecordsNoLessThanItsDuration(t *testing.T) {
	tests := []struct {
		duration time.Duration
		want     int32
	}{
		{200 * time.Millisecond, 1},
		{time.Second, 1},
		{1500 * time.Millisecond, 2},
		{3 * time.Second, 3},
		{14200 * time.Millisecond, 15},
		{15 * time.Second, 15},
	}
	for _, tt := range tests {
		t.Run(tt.duration.String(), func(t *testing.T) {
			l := &Lease{Duration: tt.duration}
			assert.Equal(t, tt.want, l.Seconds())
			assert.GreaterOrEqual(t, time.Duration(l.Seconds())*time.Second, tt.duration)
		})
	}
}
