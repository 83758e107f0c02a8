// Package lease is the coordination.k8s.io Lease that serialises the rollouts of one StatefulSet: one run
// holds it at a time, renews it while it runs, confirms it before every disruption, and bounds each
// disruptive write to the time it surely still holds it.
package lease

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

// Name is the Lease that serialises the rollouts of StatefulSet sts.
func Name(sts string) string { return sts + "-etcd-rollout" }

// Lease is the Lease held for the duration of one run. A run that dies keeps it until another run has
// watched it go unrenewed for its whole duration; that run then takes it over and knows a lowered
// partition is its predecessor's, not a stranger's.
//
// The rules are client-go's tools/leaderelection ones: an identity unique to each run (the run's Holder,
// see rollout.RunIdentity), expiry judged by what this process has seen change and never by comparing the
// holder's renewTime with the local clock (two machines' clocks may be minutes or hours apart),
// conditional writes so that of two runs racing for it exactly one wins, and a release on a clean exit.
// LeaderElector itself is not used because a rollout needs three things it does not do:
//   - refuse: LeaderElector.Run blocks until it leads, while a second `pulumi up` must fail within
//     seconds, naming the run that holds the StatefulSet (*LockedError);
//   - say whose stale lease it took over: the partition a dead run left lowered is this run's to re-lock
//     and resume (State.TookOverFrom), while a lowered partition without a predecessor is
//     interference; LeaderElector reports only the new leader;
//   - stay the holder through an API server outage longer than the lease: LeaderElector gives up after
//     RenewDeadline without a renewal, which would end a rollout with a member in flight; this lease keeps
//     trying (KeepRenewed) and renews conditionally before each disruption (Confirm).
//
// resourcelock.LeaseLock is not used as the record layer either: it keeps the last Lease it read in an
// unguarded field that Get and Update share, while here the renewing goroutine and the run's confirm
// both write the Lease. Three direct API calls are simpler than guarding it.
type Lease struct {
	Kube      kubernetes.Interface
	Namespace string
	Name      string
	// Holder names this run (Config.Holder, see rollout.RunIdentity); Duration is how long it may go
	// without renewing.
	Holder   string
	Duration time.Duration
	// clock measures how long acquire has watched a lease; nil is the real, monotonic clock. Unit tests
	// pass one that advances without waiting.
	Clock Clock
	// watching, when set, hears that acquire is watching a lease someone else holds and for how long at
	// most, so a person knows why the run waits before it starts.
	Watching func(holder string, upTo time.Duration)

	mu      sync.Mutex
	current *coordinationv1.Lease
	// renewed is when this process last wrote the lease successfully.
	renewed time.Time
	// takenOverBy is the run seen holding the lease after this one held it: from then on this run writes
	// nothing, not even its status.
	takenOverBy string
}

// Clock is the local clock a lease held by someone else is judged by.
type Clock interface {
	Now() time.Time
	After(d time.Duration) <-chan time.Time
}

// State is what acquire found before it took the lease.
type State struct {
	// TookOverFrom is the holder of a stale lease that was taken over ("" when the lease was free).
	TookOverFrom string
}

func (l *Lease) ID() string { return l.Namespace + "/" + l.Name }

// Acquire takes the lease or returns a *LockedError naming the live holder.
//
// A lease that is missing, released (no holder) or already this run's is taken at once. A lease held by
// someone else is watched: if it changes while watched (a renewal, a new holder), its holder is alive and
// the run is refused at once; a holder renews every third of its duration, so a refusal comes within
// about a third of the duration. If it stays the same for its whole leaseDurationSeconds, measured on this
// process's monotonic clock, its holder is gone and the lease is taken over. The holder's own timestamps
// are not trusted even when they say the lease expired long ago: with clocks apart they would hand a live
// lease over. So a takeover always costs one lease duration of watching (15s by default), the price of not
// trusting another machine's clock.
func (l *Lease) Acquire(ctx context.Context) (State, error) {
	clk := l.Clock
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
				return State{}, fmt.Errorf("creating lease %s: %w", l.ID(), err)
			}
			l.Set(created)
			return State{}, nil
		}
		if err != nil {
			return State{}, fmt.Errorf("reading lease %s: %w", l.ID(), err)
		}
		holder := ptr.Deref(cur.Spec.HolderIdentity, "")
		var state State
		switch {
		case holder == "" || holder == l.Holder:
			// Free, or this run's own: nothing to wait for.
		case written || seen != nil && !sameRecord(seen, cur):
			return State{}, l.locked(cur)
		default:
			if seen == nil {
				seen, seenAt = cur, clk.Now()
				if l.Watching != nil {
					l.Watching(holder, RecordDuration(seen, l.Duration))
				}
			}
			d := RecordDuration(seen, l.Duration)
			if left := d - clk.Now().Sub(seenAt); left > 0 {
				select {
				case <-ctx.Done():
					return State{}, fmt.Errorf("watching lease %s (held by %s) for a renewal: %w", l.ID(), holder, context.Cause(ctx))
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
			return State{}, fmt.Errorf("taking lease %s: %w", l.ID(), err)
		}
		l.Set(taken)
		return state, nil
	}
}

// get reads the lease, riding out a briefly unreachable API server.
func (l *Lease) get(ctx context.Context) (*coordinationv1.Lease, error) {
	var lease *coordinationv1.Lease
	err := kubeapi.WithRetry(ctx, func(ctx context.Context) error {
		var err error
		lease, err = l.Kube.CoordinationV1().Leases(l.Namespace).Get(ctx, l.Name, metav1.GetOptions{})
		return err
	})
	return lease, err
}

func (l *Lease) create(ctx context.Context) (*coordinationv1.Lease, error) {
	now := metav1.NewMicroTime(time.Now())
	return l.Kube.CoordinationV1().Leases(l.Namespace).Create(ctx, &coordinationv1.Lease{
		ObjectMeta: metav1.ObjectMeta{Name: l.Name, Namespace: l.Namespace,
			Labels: map[string]string{"app.kubernetes.io/managed-by": "etcd-rollout"}},
		Spec: coordinationv1.LeaseSpec{HolderIdentity: ptr.To(l.Holder), LeaseDurationSeconds: ptr.To(l.Seconds()),
			AcquireTime: &now, RenewTime: &now},
	}, metav1.CreateOptions{})
}

// take writes this run as the holder of cur, conditionally on cur's resourceVersion.
func (l *Lease) take(ctx context.Context, cur *coordinationv1.Lease) (*coordinationv1.Lease, error) {
	now := metav1.NewMicroTime(time.Now())
	next := cur.DeepCopy()
	if ptr.Deref(cur.Spec.HolderIdentity, "") != l.Holder {
		next.Spec.LeaseTransitions = ptr.To(ptr.Deref(cur.Spec.LeaseTransitions, 0) + 1)
	}
	next.Spec.HolderIdentity = ptr.To(l.Holder)
	next.Spec.LeaseDurationSeconds = ptr.To(l.Seconds())
	next.Spec.AcquireTime, next.Spec.RenewTime = &now, &now
	return l.Kube.CoordinationV1().Leases(l.Namespace).Update(ctx, next, metav1.UpdateOptions{})
}

// locked is the refusal for a holder seen alive just now.
func (l *Lease) locked(cur *coordinationv1.Lease) *LockedError {
	return &LockedError{Lease: l.ID(), Holder: ptr.Deref(cur.Spec.HolderIdentity, ""),
		Renewed: time.Now(), ExpiresIn: RecordDuration(cur, l.Duration)}
}

// sameRecord says nobody renewed, took or released the lease between two reads. Only the spec counts: a
// label edited by a person is no sign of life.
func sameRecord(a, b *coordinationv1.Lease) bool {
	return apiequality.Semantic.DeepEqual(a.Spec, b.Spec)
}

// RecordDuration is how long the lease's holder promised to go at most without renewing it; fallback when
// the record does not say.
func RecordDuration(l *coordinationv1.Lease, fallback time.Duration) time.Duration {
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

// Renew extends the lease; it fails when somebody else has taken it meanwhile.
func (l *Lease) Renew(ctx context.Context) error {
	cur, err := l.Kube.CoordinationV1().Leases(l.Namespace).Get(ctx, l.Name, metav1.GetOptions{})
	if err != nil {
		return fmt.Errorf("renewing lease %s: %w", l.ID(), err)
	}
	if holder := ptr.Deref(cur.Spec.HolderIdentity, ""); holder != l.Holder {
		l.lostTo(holder)
		return fmt.Errorf("%w: lease %s is now held by %q", ErrLost, l.ID(), holder)
	}
	now := metav1.NewMicroTime(time.Now())
	cur.Spec.RenewTime = &now
	updated, err := l.Kube.CoordinationV1().Leases(l.Namespace).Update(ctx, cur, metav1.UpdateOptions{})
	if err != nil {
		return fmt.Errorf("renewing lease %s: %w", l.ID(), err)
	}
	l.Set(updated)
	return nil
}

// KeepRenewed renews every third of the duration until stop is called. It cancels the run with ErrLost
// when the lease was taken or deleted. While the API server cannot be reached it keeps trying instead: an
// API server restart can outlast the lease, and nobody can take the lease over without the API server
// either. What keeps two runs apart then is confirm, which the run calls before every disruption.
func (l *Lease) KeepRenewed(ctx context.Context, cancel context.CancelCauseFunc) (stop func()) {
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		tick := time.NewTicker(l.Duration / 3)
		defer tick.Stop()
		for {
			select {
			case <-done:
				return
			case <-ctx.Done():
				return
			case <-tick.C:
				rctx, rcancel := context.WithTimeout(ctx, l.Duration/3)
				err := l.Renew(rctx)
				rcancel()
				switch {
				case errors.Is(err, ErrLost):
					cancel(err)
					return
				case apierrors.IsNotFound(err):
					cancel(fmt.Errorf("%w: %v", ErrLost, err))
					return
				}
			}
		}
	}()
	return func() { close(done); wg.Wait() }
}

// Confirm makes sure this run still holds the lease before it disrupts a member. When the last renewal is
// older than half the duration (the API server was away), it renews now, retrying while the API server
// comes back; the update is conditional on the lease's resourceVersion, so of this run and one that took
// the lease over meanwhile exactly one proceeds.
func (l *Lease) Confirm(ctx context.Context) error {
	l.mu.Lock()
	fresh := time.Since(l.renewed) < l.Duration/2
	l.mu.Unlock()
	if fresh {
		return nil
	}
	var lost error
	err := kubeapi.WithRetry(ctx, func(ctx context.Context) error {
		err := l.Renew(ctx)
		if errors.Is(err, ErrLost) {
			lost = err // final: retrying cannot give it back
			return nil
		}
		return err
	})
	switch {
	case lost != nil:
		return lost
	case err != nil:
		return fmt.Errorf("%w: could not confirm lease %s is still ours: %v", ErrLost, l.ID(), err)
	}
	return nil
}

// SurelyUntil is the end of the time this run surely still holds the lease: three quarters of its duration
// from the last renewal, by this process's clock (Within says why).
func (l *Lease) SurelyUntil() time.Time {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.renewed.Add(l.Duration * 3 / 4)
}

// TakenBy names the run that holds the lease now when it is not this one ("" when this run holds it, nobody
// does, or the lease cannot be read): a run that lost its lease writes nothing more, not even a re-lock, which
// would break the new holder's roll. It reads afresh and briefly, on a context of its own.
func (l *Lease) TakenBy(ctx context.Context) string {
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	cur, err := l.get(rctx)
	if err != nil {
		return ""
	}
	if holder := ptr.Deref(cur.Spec.HolderIdentity, ""); holder != l.Holder {
		l.lostTo(holder)
		return holder
	}
	return ""
}

// lostTo records that holder (empty: nobody) holds the lease this run held.
func (l *Lease) lostTo(holder string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if holder != "" && l.current != nil {
		l.takenOverBy = holder
	}
}

// TakenOver says another run took this run's lease: what this run would publish is no longer the truth.
func (l *Lease) TakenOver() bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.takenOverBy != ""
}

// Within bounds a disruptive write to the time this run surely still holds the lease: three quarters of
// its duration from the last renewal, by this process's clock. Another run takes the lease over only after it
// watched it unrenewed for a whole duration, so a write retried past that point (an API server that answers
// again late) could land while that run rolls; this one gives up instead.
func (l *Lease) Within(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithDeadline(ctx, l.SurelyUntil())
}

// Release clears the holder so the next run starts at once and knows this one ended cleanly.
func (l *Lease) Release(ctx context.Context) error {
	l.mu.Lock()
	cur := l.current
	l.mu.Unlock()
	if cur == nil {
		return nil
	}
	leases := l.Kube.CoordinationV1().Leases(l.Namespace)
	latest, err := leases.Get(ctx, l.Name, metav1.GetOptions{})
	if err != nil {
		return fmt.Errorf("releasing lease %s: %w", l.ID(), err)
	}
	if ptr.Deref(latest.Spec.HolderIdentity, "") != l.Holder {
		return nil // someone took it over; it is theirs now
	}
	latest.Spec.HolderIdentity = ptr.To("")
	if _, err := leases.Update(ctx, latest, metav1.UpdateOptions{}); err != nil {
		return fmt.Errorf("releasing lease %s: %w", l.ID(), err)
	}
	l.Set(nil)
	return nil
}

// Set makes lease the record this process holds (nil: none), as Acquire and Release leave it.
func (l *Lease) Set(lease *coordinationv1.Lease) {
	l.mu.Lock()
	l.current = lease
	if lease != nil {
		l.renewed, l.takenOverBy = time.Now(), ""
	}
	l.mu.Unlock()
}

// Seconds is the duration the Lease records, which another run watches it unrenewed for before it takes it
// over: rounded up, never below this run's own bound on its writes (withinLease), so a lease of 1.5s is
// recorded as 2 (issue 31's audit: rounded down to 1, a takeover could land before this run's last write).
func (l *Lease) Seconds() int32 {
	return max(int32((l.Duration+time.Second-1)/time.Second), 1)
}

// NewHolder is the run seen holding the lease after this one ("" while none was seen).
func (l *Lease) NewHolder() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.takenOverBy
}

// RenewTime is when the record says its holder last renewed it (else acquired it, else created it), by the
// holder's clock: an estimate for a person, never what a takeover is judged by.
func RenewTime(l *coordinationv1.Lease) time.Time {
	switch {
	case l.Spec.RenewTime != nil:
		return l.Spec.RenewTime.Time
	case l.Spec.AcquireTime != nil:
		return l.Spec.AcquireTime.Time
	}
	return l.CreationTimestamp.Time
}

// HeldSince says whether this process holds the lease now and since when (its acquireTime, which each run's
// Acquire sets anew and renewals keep).
func (l *Lease) HeldSince() (string, bool) {
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

// ErrLost is the cause when the run's Lease could not be renewed and another holder may now act.
var ErrLost = errors.New("lost the rollout lease")

// LockedError is returned when another rollout holds the StatefulSet's Lease.
type LockedError struct {
	Lease   string
	Holder  string
	Renewed time.Time
	// ExpiresIn is how long until the lease counts as stale if its holder stops renewing.
	ExpiresIn time.Duration
}

func (e *LockedError) Error() string {
	return fmt.Sprintf("another rollout holds lease %s: %s (renewed %s ago); wait for it to finish, or if it is gone, retry after %s",
		e.Lease, e.Holder, time.Since(e.Renewed).Round(time.Second), e.ExpiresIn.Round(time.Second))
}
