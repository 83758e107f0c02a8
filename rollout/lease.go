package rollout

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/clock"
	"k8s.io/utils/ptr"

	"github.com/etcd-rollout/pulumi-etcd-rollout/rollout/internal/kubeapi"
)

// LeaseName is the coordination.k8s.io Lease that serialises rollouts of one StatefulSet.
func LeaseName(sts string) string { return sts + "-etcd-rollout" }

// rolloutLease is a Lease held for the duration of one run. A run that dies keeps it until another run has
// watched it go unrenewed for its whole duration; that run then takes it over and knows a lowered
// partition is its predecessor's, not a stranger's.
//
// The rules are client-go's tools/leaderelection ones: an identity unique to each run (Config.Holder,
// see RunIdentity), expiry judged by what this process has seen change and never by comparing the
// holder's renewTime with the local clock (two machines' clocks may be minutes or hours apart),
// conditional writes so that of two runs racing for it exactly one wins, and a release on a clean exit.
// LeaderElector itself is not used because a rollout needs three things it does not do:
//   - refuse: LeaderElector.Run blocks until it leads, while a second `pulumi up` must fail within
//     seconds, naming the run that holds the StatefulSet (*LockedError);
//   - say whose stale lease it took over: the partition a dead run left lowered is this run's to re-lock
//     and resume (leaseState.TookOverFrom), while a lowered partition without a predecessor is
//     interference; LeaderElector reports only the new leader;
//   - stay the holder through an API server outage longer than the lease: LeaderElector gives up after
//     RenewDeadline without a renewal, which would end a rollout with a member in flight; this lease keeps
//     trying (keepRenewed) and renews conditionally before each disruption (confirm).
//
// resourcelock.LeaseLock is not used as the record layer either: it keeps the last Lease it read in an
// unguarded field that Get and Update share, while here the renewing goroutine and the run's confirm
// both write the Lease. Three direct API calls are simpler than guarding it.
type rolloutLease struct {
	kube      kubernetes.Interface
	namespace string
	name      string
	holder    string
	duration  time.Duration
	// clock measures how long acquire has watched a lease; nil is the real, monotonic clock. Unit tests
	// pass one that advances without waiting.
	clock leaseClock
	// watching, when set, hears that acquire is watching a lease someone else holds and for how long at
	// most, so a person knows why the run waits before it starts.
	watching func(holder string, upTo time.Duration)

	mu      sync.Mutex
	current *coordinationv1.Lease
	// renewed is when this process last wrote the lease successfully.
	renewed time.Time
	// takenOverBy is the run seen holding the lease after this one held it: from then on this run writes
	// nothing, not even its status.
	takenOverBy string
}

// leaseClock is the local clock a lease held by someone else is judged by.
type leaseClock interface {
	Now() time.Time
	After(d time.Duration) <-chan time.Time
}

// leaseState is what acquire found before it took the lease.
type leaseState struct {
	// TookOverFrom is the holder of a stale lease that was taken over ("" when the lease was free).
	TookOverFrom string
}

func (l *rolloutLease) id() string { return l.namespace + "/" + l.name }

// acquire takes the lease or returns a *LockedError naming the live holder.
//
// A lease that is missing, released (no holder) or already this run's is taken at once. A lease held by
// someone else is watched: if it changes while watched (a renewal, a new holder), its holder is alive and
// the run is refused at once; a holder renews every third of its duration, so a refusal comes within
// about a third of the duration. If it stays the same for its whole leaseDurationSeconds, measured on this
// process's monotonic clock, its holder is gone and the lease is taken over. The holder's own timestamps
// are not trusted even when they say the lease expired long ago: with clocks apart they would hand a live
// lease over. So a takeover always costs one lease duration of watching (15s by default), the price of not
// trusting another machine's clock.
func (l *rolloutLease) acquire(ctx context.Context) (leaseState, error) {
	clk := l.clock
	if clk == nil {
		clk = clock.RealClock{}
	}
	var (
		seen   *coordinationv1.Lease // someone else's record as first read
		seenAt time.Time
		// written says someone else wrote the lease between this run's read and its write (a create or
		// an update that conflicted): whoever holds it now is alive.
		written bool
	)
	for {
		cur, err := l.get(ctx)
		if apierrors.IsNotFound(err) {
			created, err := l.create(ctx)
			if apierrors.IsAlreadyExists(err) {
				written = true
				continue
			}
			if err != nil {
				return leaseState{}, fmt.Errorf("creating lease %s: %w", l.id(), err)
			}
			l.set(created)
			return leaseState{}, nil
		}
		if err != nil {
			return leaseState{}, fmt.Errorf("reading lease %s: %w", l.id(), err)
		}
		holder := ptr.Deref(cur.Spec.HolderIdentity, "")
		var state leaseState
		switch {
		case holder == "" || holder == l.holder:
			// Free, or this run's own: nothing to wait for.
		case written || seen != nil && !sameRecord(seen, cur):
			return leaseState{}, l.locked(cur)
		default:
			if seen == nil {
				seen, seenAt = cur, clk.Now()
				if l.watching != nil {
					l.watching(holder, recordDuration(seen, l.duration))
				}
			}
			d := recordDuration(seen, l.duration)
			if left := d - clk.Now().Sub(seenAt); left > 0 {
				select {
				case <-ctx.Done():
					return leaseState{}, fmt.Errorf("watching lease %s (held by %s) for a renewal: %w", l.id(), holder, context.Cause(ctx))
				case <-clk.After(min(watchInterval(d), left)):
				}
				continue
			}
			state.TookOverFrom = holder
		}
		taken, err := l.take(ctx, cur)
		if apierrors.IsConflict(err) {
			// Written since it was read. A takeover finds the change on the next look (sameRecord); a
			// free lease's new holder has just written it.
			written = written || seen == nil
			continue
		}
		if err != nil {
			return leaseState{}, fmt.Errorf("taking lease %s: %w", l.id(), err)
		}
		l.set(taken)
		return state, nil
	}
}

// get reads the lease, riding out a briefly unreachable API server.
func (l *rolloutLease) get(ctx context.Context) (*coordinationv1.Lease, error) {
	var lease *coordinationv1.Lease
	err := kubeapi.WithRetry(ctx, func(ctx context.Context) error {
		var err error
		lease, err = l.kube.CoordinationV1().Leases(l.namespace).Get(ctx, l.name, metav1.GetOptions{})
		return err
	})
	return lease, err
}

func (l *rolloutLease) create(ctx context.Context) (*coordinationv1.Lease, error) {
	now := metav1.NewMicroTime(time.Now())
	return l.kube.CoordinationV1().Leases(l.namespace).Create(ctx, &coordinationv1.Lease{
		ObjectMeta: metav1.ObjectMeta{Name: l.name, Namespace: l.namespace,
			Labels: map[string]string{"app.kubernetes.io/managed-by": "etcd-rollout"}},
		Spec: coordinationv1.LeaseSpec{HolderIdentity: ptr.To(l.holder), LeaseDurationSeconds: ptr.To(l.seconds()),
			AcquireTime: &now, RenewTime: &now},
	}, metav1.CreateOptions{})
}

// take writes this run as the holder of cur, conditionally on cur's resourceVersion.
func (l *rolloutLease) take(ctx context.Context, cur *coordinationv1.Lease) (*coordinationv1.Lease, error) {
	now := metav1.NewMicroTime(time.Now())
	next := cur.DeepCopy()
	if ptr.Deref(cur.Spec.HolderIdentity, "") != l.holder {
		next.Spec.LeaseTransitions = ptr.To(ptr.Deref(cur.Spec.LeaseTransitions, 0) + 1)
	}
	next.Spec.HolderIdentity = ptr.To(l.holder)
	next.Spec.LeaseDurationSeconds = ptr.To(l.seconds())
	next.Spec.AcquireTime, next.Spec.RenewTime = &now, &now
	return l.kube.CoordinationV1().Leases(l.namespace).Update(ctx, next, metav1.UpdateOptions{})
}

// locked is the refusal for a holder seen alive just now.
func (l *rolloutLease) locked(cur *coordinationv1.Lease) *LockedError {
	return &LockedError{Lease: l.id(), Holder: ptr.Deref(cur.Spec.HolderIdentity, ""),
		Renewed: time.Now(), ExpiresIn: recordDuration(cur, l.duration)}
}

// sameRecord says nobody renewed, took or released the lease between two reads. Only the spec counts: a
// label edited by a person is no sign of life.
func sameRecord(a, b *coordinationv1.Lease) bool {
	return apiequality.Semantic.DeepEqual(a.Spec, b.Spec)
}

// recordDuration is how long the lease's holder promised to go at most without renewing it; fallback when
// the record does not say.
func recordDuration(l *coordinationv1.Lease, fallback time.Duration) time.Duration {
	if s := ptr.Deref(l.Spec.LeaseDurationSeconds, 0); s > 0 {
		return time.Duration(s) * time.Second
	}
	return fallback
}

// watchInterval is how often a watched lease is read: a tenth of its duration, so a renewal (every third)
// is seen soon after it happens, and at most once a second.
func watchInterval(d time.Duration) time.Duration {
	return min(max(d/10, 10*time.Millisecond), time.Second)
}

// renew extends the lease; it fails when somebody else has taken it meanwhile.
func (l *rolloutLease) renew(ctx context.Context) error {
	cur, err := l.kube.CoordinationV1().Leases(l.namespace).Get(ctx, l.name, metav1.GetOptions{})
	if err != nil {
		return fmt.Errorf("renewing lease %s: %w", l.id(), err)
	}
	if holder := ptr.Deref(cur.Spec.HolderIdentity, ""); holder != l.holder {
		l.lostTo(holder)
		return fmt.Errorf("%w: lease %s is now held by %q", ErrLeaseLost, l.id(), holder)
	}
	now := metav1.NewMicroTime(time.Now())
	cur.Spec.RenewTime = &now
	updated, err := l.kube.CoordinationV1().Leases(l.namespace).Update(ctx, cur, metav1.UpdateOptions{})
	if err != nil {
		return fmt.Errorf("renewing lease %s: %w", l.id(), err)
	}
	l.set(updated)
	return nil
}

// keepRenewed renews every third of the duration until stop is called. It cancels the run with ErrLeaseLost
// when the lease was taken or deleted. While the API server cannot be reached it keeps trying instead: an
// API server restart can outlast the lease, and nobody can take the lease over without the API server
// either. What keeps two runs apart then is confirm, which the run calls before every disruption.
func (l *rolloutLease) keepRenewed(ctx context.Context, cancel context.CancelCauseFunc) (stop func()) {
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		tick := time.NewTicker(l.duration / 3)
		defer tick.Stop()
		for {
			select {
			case <-done:
				return
			case <-ctx.Done():
				return
			case <-tick.C:
				rctx, rcancel := context.WithTimeout(ctx, l.duration/3)
				err := l.renew(rctx)
				rcancel()
				switch {
				case errors.Is(err, ErrLeaseLost):
					cancel(err)
					return
				case apierrors.IsNotFound(err):
					cancel(fmt.Errorf("%w: %v", ErrLeaseLost, err))
					return
				}
			}
		}
	}()
	return func() { close(done); wg.Wait() }
}

// confirm makes sure this run still holds the lease before it disrupts a member. When the last renewal is
// older than half the duration (the API server was away), it renews now, retrying while the API server
// comes back; the update is conditional on the lease's resourceVersion, so of this run and one that took
// the lease over meanwhile exactly one proceeds.
func (l *rolloutLease) confirm(ctx context.Context) error {
	l.mu.Lock()
	fresh := time.Since(l.renewed) < l.duration/2
	l.mu.Unlock()
	if fresh {
		return nil
	}
	var lost error
	err := kubeapi.WithRetry(ctx, func(ctx context.Context) error {
		err := l.renew(ctx)
		if errors.Is(err, ErrLeaseLost) {
			lost = err // final: retrying cannot give it back
			return nil
		}
		return err
	})
	switch {
	case lost != nil:
		return lost
	case err != nil:
		return fmt.Errorf("%w: could not confirm lease %s is still ours: %v", ErrLeaseLost, l.id(), err)
	}
	return nil
}

// surelyUntil is the end of the time this run surely still holds the lease: three quarters of its duration
// from the last renewal, by this process's clock (withinLease says why).
func (l *rolloutLease) surelyUntil() time.Time {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.renewed.Add(l.duration * 3 / 4)
}

// takenBy names the run that holds the lease now when it is not this one ("" when this run holds it, nobody
// does, or the lease cannot be read): a run that lost its lease writes nothing more, not even a re-lock, which
// would break the new holder's roll. It reads afresh and briefly, on a context of its own.
func (l *rolloutLease) takenBy(ctx context.Context) string {
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	cur, err := l.get(rctx)
	if err != nil {
		return ""
	}
	if holder := ptr.Deref(cur.Spec.HolderIdentity, ""); holder != l.holder {
		l.lostTo(holder)
		return holder
	}
	return ""
}

// lostTo records that holder (empty: nobody) holds the lease this run held.
func (l *rolloutLease) lostTo(holder string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if holder != "" && l.current != nil {
		l.takenOverBy = holder
	}
}

// takenOver says another run took this run's lease: what this run would publish is no longer the truth.
func (l *rolloutLease) takenOver() bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.takenOverBy != ""
}

// withinLease bounds a disruptive write to the time this run surely still holds the lease: three quarters of
// its duration from the last renewal, by this process's clock. Another run takes the lease over only after it
// watched it unrenewed for a whole duration, so a write retried past that point (an API server that answers
// again late) could land while that run rolls; this one gives up instead.
func (l *rolloutLease) withinLease(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithDeadline(ctx, l.surelyUntil())
}

// release clears the holder so the next run starts at once and knows this one ended cleanly.
func (l *rolloutLease) release(ctx context.Context) error {
	l.mu.Lock()
	cur := l.current
	l.mu.Unlock()
	if cur == nil {
		return nil
	}
	leases := l.kube.CoordinationV1().Leases(l.namespace)
	latest, err := leases.Get(ctx, l.name, metav1.GetOptions{})
	if err != nil {
		return fmt.Errorf("releasing lease %s: %w", l.id(), err)
	}
	if ptr.Deref(latest.Spec.HolderIdentity, "") != l.holder {
		return nil // someone took it over; it is theirs now
	}
	latest.Spec.HolderIdentity = ptr.To("")
	if _, err := leases.Update(ctx, latest, metav1.UpdateOptions{}); err != nil {
		return fmt.Errorf("releasing lease %s: %w", l.id(), err)
	}
	l.set(nil)
	return nil
}

func (l *rolloutLease) set(lease *coordinationv1.Lease) {
	l.mu.Lock()
	l.current = lease
	if lease != nil {
		l.renewed, l.takenOverBy = time.Now(), ""
	}
	l.mu.Unlock()
}

// seconds is the duration the Lease records, which another run watches it unrenewed for before it takes it
// over: rounded up, never below this run's own bound on its writes (withinLease), so a lease of 1.5s is
// recorded as 2 (issue 31's audit: rounded down to 1, a takeover could land before this run's last write).
func (l *rolloutLease) seconds() int32 {
	return max(int32((l.duration+time.Second-1)/time.Second), 1)
}

// newHolder is the run seen holding the lease after this one ("" while none was seen).
func (l *rolloutLease) newHolder() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.takenOverBy
}

func renewTime(l *coordinationv1.Lease) time.Time {
	switch {
	case l.Spec.RenewTime != nil:
		return l.Spec.RenewTime.Time
	case l.Spec.AcquireTime != nil:
		return l.Spec.AcquireTime.Time
	}
	return l.CreationTimestamp.Time
}

// heldSince says whether this process holds the lease now and since when (its acquireTime, which each run's
// acquire sets anew and renewals keep).
func (l *rolloutLease) heldSince() (string, bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.current == nil {
		return "", false
	}
	key := ""
	if at := l.current.Spec.AcquireTime; at != nil {
		key = at.UTC().Format(time.RFC3339Nano)
	}
	return key, true
}
