package rollout

import (
	"context"
	"errors"
	"strconv"
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
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/fake"
	coordinationv1client "k8s.io/client-go/kubernetes/typed/coordination/v1"
	k8stesting "k8s.io/client-go/testing"
	"k8s.io/utils/ptr"
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
		{"stale and taken over meanwhile: lost", "thief", time.Minute, ErrLeaseLost, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			kube := fake.NewClientset(&coordinationv1.Lease{
				ObjectMeta: metav1.ObjectMeta{Name: LeaseName("etcd"), Namespace: "db"},
				Spec:       coordinationv1.LeaseSpec{HolderIdentity: ptr.To(tt.holder), LeaseDurationSeconds: ptr.To(int32(15))},
			})
			l := &rolloutLease{kube: kube, namespace: "db", name: LeaseName("etcd"), holder: "me", duration: 15 * time.Second,
				renewed: time.Now().Add(-tt.renewed)}
			err := l.confirm(context.Background())
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

// stepClock is a leaseClock that never waits: After moves its time on at once, so a lease watched for its
// whole duration costs no real time.
type stepClock struct {
	mu    sync.Mutex
	start time.Time
	now   time.Time
}

func newStepClock() *stepClock {
	now := time.Now()
	return &stepClock{start: now, now: now}
}

func (c *stepClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *stepClock) After(d time.Duration) <-chan time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
	ch := make(chan time.Time, 1)
	ch <- c.now
	return ch
}

// waited is how much time has passed on the clock.
func (c *stepClock) waited() time.Duration {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now.Sub(c.start)
}

var leasesResource = coordinationv1.SchemeGroupVersion.WithResource("leases")

// versionedLeases makes the fake API server's Leases behave like the real one's: every write gets a new
// resourceVersion, and an update carrying an old one fails with a conflict.
func versionedLeases(kube *fake.Clientset) {
	var version atomic.Int64
	next := func() string { return strconv.FormatInt(version.Add(1), 10) }
	kube.PrependReactor("create", "leases", func(a k8stesting.Action) (bool, runtime.Object, error) {
		lease := a.(k8stesting.CreateAction).GetObject().(*coordinationv1.Lease).DeepCopy()
		lease.ResourceVersion = next()
		if err := kube.Tracker().Create(leasesResource, lease, a.GetNamespace()); err != nil {
			return true, nil, err
		}
		return true, lease, nil
	})
	kube.PrependReactor("update", "leases", func(a k8stesting.Action) (bool, runtime.Object, error) {
		lease := a.(k8stesting.UpdateAction).GetObject().(*coordinationv1.Lease).DeepCopy()
		cur, err := kube.Tracker().Get(leasesResource, a.GetNamespace(), lease.Name)
		if err != nil {
			return true, nil, err
		}
		if cur.(*coordinationv1.Lease).ResourceVersion != lease.ResourceVersion {
			return true, nil, apierrors.NewConflict(leasesResource.GroupResource(), lease.Name,
				errors.New("the object has been modified; please apply your changes to the latest version and try again"))
		}
		lease.ResourceVersion = next()
		if err := kube.Tracker().Update(leasesResource, lease, a.GetNamespace()); err != nil {
			return true, nil, err
		}
		return true, lease, nil
	})
}

// heldLease is a Lease of StatefulSet db/etcd held by holder, last renewed at renewed by the holder's clock.
func heldLease(holder string, renewed time.Time) *coordinationv1.Lease {
	return &coordinationv1.Lease{
		ObjectMeta: metav1.ObjectMeta{Name: LeaseName("etcd"), Namespace: "db"},
		Spec: coordinationv1.LeaseSpec{HolderIdentity: ptr.To(holder), LeaseDurationSeconds: ptr.To(int32(15)),
			RenewTime: ptr.To(metav1.NewMicroTime(renewed)), AcquireTime: ptr.To(metav1.NewMicroTime(renewed))},
	}
}

// liveHolder renews db/etcd's Lease every third of its duration as clk counts time, as a run that holds it
// does, writing renewTime from its own clock, skew away from clk. The renewal happens when the Lease is read.
func liveHolder(kube *fake.Clientset, clk leaseClock, skew time.Duration) {
	last := clk.Now()
	kube.PrependReactor("get", "leases", func(a k8stesting.Action) (bool, runtime.Object, error) {
		obj, err := kube.Tracker().Get(leasesResource, a.GetNamespace(), LeaseName("etcd"))
		if err != nil {
			return false, nil, nil
		}
		lease := obj.(*coordinationv1.Lease).DeepCopy()
		every := time.Duration(ptr.Deref(lease.Spec.LeaseDurationSeconds, 0)) * time.Second / 3
		if now := clk.Now(); now.Sub(last) >= every {
			last = now
			lease.Spec.RenewTime = ptr.To(metav1.NewMicroTime(now.Add(skew)))
			if err := kube.Tracker().Update(leasesResource, lease, a.GetNamespace()); err != nil {
				return true, nil, err
			}
		}
		return false, nil, nil
	})
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
		{name: "released lease: taken at once", lease: heldLease("", now.Add(-time.Minute)), wantHolder: "me"},
		{name: "this run's own lease: taken again at once", lease: heldLease("me", now), wantHolder: "me"},
		{name: "live holder, same clock: refused within a third of the duration",
			lease: heldLease("ci-runner-7", now), renewing: true,
			wantHolder: "ci-runner-7", wantRefused: true, maxWait: leaseDuration/3 + time.Second},
		{name: "live holder, clock an hour behind ours: refused, not taken over",
			lease: heldLease("ci-runner-7", now.Add(-time.Hour)), renewing: true, skew: -time.Hour,
			wantHolder: "ci-runner-7", wantRefused: true, maxWait: leaseDuration/3 + time.Second},
		{name: "live holder, clock an hour ahead of ours: refused",
			lease: heldLease("ci-runner-7", now.Add(time.Hour)), renewing: true, skew: time.Hour,
			wantHolder: "ci-runner-7", wantRefused: true, maxWait: leaseDuration/3 + time.Second},
		{name: "dead holder, renewed just before it died: taken over after the duration",
			lease:      heldLease("killed-run", now),
			wantHolder: "me", wantTookOver: "killed-run", minWait: leaseDuration, maxWait: leaseDuration},
		{name: "dead holder whose renewTime says it expired an hour ago: still watched for the duration",
			lease:      heldLease("killed-run", now.Add(-time.Hour)),
			wantHolder: "me", wantTookOver: "killed-run", minWait: leaseDuration, maxWait: leaseDuration},
		{name: "dead holder whose clock ran an hour ahead: taken over after the duration, not in an hour",
			lease:      heldLease("killed-run", now.Add(time.Hour)),
			wantHolder: "me", wantTookOver: "killed-run", minWait: leaseDuration, maxWait: leaseDuration},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ctx := context.Background()
			kube := fake.NewClientset()
			versionedLeases(kube)
			clk := newStepClock()
			if tt.lease != nil {
				_, err := kube.CoordinationV1().Leases("db").Create(ctx, tt.lease, metav1.CreateOptions{})
				require.NoError(t, err)
			}
			if tt.renewing {
				liveHolder(kube, clk, tt.skew)
			}
			l := &rolloutLease{kube: kube, namespace: "db", name: LeaseName("etcd"), holder: "me", duration: 3 * time.Second, clock: clk}
			var watched []string
			l.watching = func(holder string, upTo time.Duration) { watched = append(watched, holder+" for "+upTo.String()) }

			state, err := l.acquire(ctx)

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
			assert.GreaterOrEqual(t, clk.waited(), tt.minWait, "watched at least")
			assert.LessOrEqual(t, clk.waited(), tt.maxWait, "watched at most")
			lease, err := kube.CoordinationV1().Leases("db").Get(ctx, LeaseName("etcd"), metav1.GetOptions{})
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
		{"both take a released one", heldLease("", time.Now()), "update"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ctx := context.Background()
			kube := fake.NewClientset()
			versionedLeases(kube)
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
					other := heldLease("other-run", time.Now())
					if tt.verb == "create" {
						err = kube.Tracker().Create(leasesResource, other, "db")
						if err == nil {
							err = apierrors.NewAlreadyExists(leasesResource.GroupResource(), other.Name)
						}
						return
					}
					err = kube.Tracker().Update(leasesResource, other, "db")
					if err == nil {
						err = apierrors.NewConflict(leasesResource.GroupResource(), other.Name, errors.New("the object has been modified"))
					}
				})
				return handled, nil, err
			})
			clk := newStepClock()
			l := &rolloutLease{kube: kube, namespace: "db", name: LeaseName("etcd"), holder: "me", duration: 15 * time.Second, clock: clk}
			_, err := l.acquire(ctx)
			var locked *LockedError
			require.ErrorAs(t, err, &locked)
			assert.Equal(t, "other-run", locked.Holder)
			assert.Zero(t, clk.waited(), "refused at once")
		})
	}
}

// Two runs watch the same dead holder's lease and both try to take it over, each having read it before
// either writes: the takeover is conditional on what was read, so exactly one wins, and the other is
// refused naming the winner.
func TestLeaseAcquireRacingTakeoversExactlyOneWins(t *testing.T) {
	ctx := context.Background()
	kube := fake.NewClientset()
	versionedLeases(kube)
	_, err := kube.CoordinationV1().Leases("db").Create(ctx, heldLease("killed-run", time.Now()), metav1.CreateOptions{})
	require.NoError(t, err)
	racers := []string{"run-a", "run-b"}
	var bothRead sync.WaitGroup
	bothRead.Add(len(racers))
	states := make([]leaseState, len(racers))
	errs := make([]error, len(racers))
	var wg sync.WaitGroup
	for r, holder := range racers {
		l := &rolloutLease{kube: writesTogether(kube, &bothRead), namespace: "db", name: LeaseName("etcd"), holder: holder,
			duration: 15 * time.Second, clock: newStepClock()}
		wg.Add(1)
		go func() { defer wg.Done(); states[r], errs[r] = l.acquire(ctx) }()
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
	lease, err := kube.CoordinationV1().Leases("db").Get(ctx, LeaseName("etcd"), metav1.GetOptions{})
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
	kube := fake.NewClientset(heldLease("ci-runner-7", time.Now()))
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	l := &rolloutLease{kube: kube, namespace: "db", name: LeaseName("etcd"), holder: "me", duration: 15 * time.Second}
	_, err := l.acquire(ctx)
	require.ErrorIs(t, err, context.Canceled)
	assert.Contains(t, err.Error(), "watching lease db/etcd-etcd-rollout (held by ci-runner-7) for a renewal")
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
			_, err := c.kube.CoordinationV1().Leases("db").Create(context.Background(), heldLease("ci-runner-7", time.Now().Add(tt.renewed)), metav1.CreateOptions{})
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
	obj, err := c.kube.Tracker().Get(leasesResource, "db", LeaseName("etcd"))
	require.NoError(t, err)
	lease := obj.(*coordinationv1.Lease).DeepCopy()
	lease.Spec.HolderIdentity = ptr.To(holder)
	require.NoError(t, c.kube.Tracker().Update(leasesResource, lease, "db"))
}
