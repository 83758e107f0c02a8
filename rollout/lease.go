package rollout

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"
)

// LeaseName is the coordination.k8s.io Lease that serialises rollouts of one StatefulSet.
func LeaseName(sts string) string { return sts + "-etcd-rollout" }

// rolloutLease is a Lease held for the duration of one run. A run that dies keeps it until it expires;
// the next run then takes it over and knows a lowered partition is its predecessor's, not a stranger's.
type rolloutLease struct {
	kube      kubernetes.Interface
	namespace string
	name      string
	holder    string
	duration  time.Duration

	mu      sync.Mutex
	current *coordinationv1.Lease
	// renewed is when this process last wrote the lease successfully.
	renewed time.Time
}

// leaseState is what acquire found before it took the lease.
type leaseState struct {
	// TookOverFrom is the holder of a stale lease that was taken over ("" when the lease was free).
	TookOverFrom string
}

func (l *rolloutLease) id() string { return l.namespace + "/" + l.name }

// acquire takes the lease or returns a *LockedError naming the live holder. Create and Update are
// conditional, so of two runs racing for it exactly one wins.
func (l *rolloutLease) acquire(ctx context.Context) (leaseState, error) {
	now := metav1.NewMicroTime(time.Now())
	leases := l.kube.CoordinationV1().Leases(l.namespace)
	existing, err := leases.Get(ctx, l.name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		created, err := leases.Create(ctx, &coordinationv1.Lease{
			ObjectMeta: metav1.ObjectMeta{Name: l.name, Namespace: l.namespace,
				Labels: map[string]string{"app.kubernetes.io/managed-by": "etcd-rollout"}},
			Spec: coordinationv1.LeaseSpec{HolderIdentity: ptr.To(l.holder), LeaseDurationSeconds: ptr.To(l.seconds()),
				AcquireTime: &now, RenewTime: &now},
		}, metav1.CreateOptions{})
		if apierrors.IsAlreadyExists(err) {
			return l.acquire(ctx) // lost the race to create: report whoever won
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
	var state leaseState
	if holder := ptr.Deref(existing.Spec.HolderIdentity, ""); holder != "" && holder != l.holder {
		if expiresIn := leaseExpiresIn(existing, time.Now()); expiresIn > 0 {
			return leaseState{}, &LockedError{Lease: l.id(), Holder: holder, Renewed: renewTime(existing), ExpiresIn: expiresIn}
		}
		state.TookOverFrom = holder
	}
	next := existing.DeepCopy()
	next.Spec.HolderIdentity = ptr.To(l.holder)
	next.Spec.LeaseDurationSeconds = ptr.To(l.seconds())
	next.Spec.AcquireTime, next.Spec.RenewTime = &now, &now
	updated, err := leases.Update(ctx, next, metav1.UpdateOptions{})
	if apierrors.IsConflict(err) {
		return l.acquire(ctx)
	}
	if err != nil {
		return leaseState{}, fmt.Errorf("taking lease %s: %w", l.id(), err)
	}
	l.set(updated)
	return state, nil
}

// renew extends the lease; it fails when somebody else has taken it meanwhile.
func (l *rolloutLease) renew(ctx context.Context) error {
	cur, err := l.kube.CoordinationV1().Leases(l.namespace).Get(ctx, l.name, metav1.GetOptions{})
	if err != nil {
		return fmt.Errorf("renewing lease %s: %w", l.id(), err)
	}
	if holder := ptr.Deref(cur.Spec.HolderIdentity, ""); holder != l.holder {
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
	err := withAPIRetry(ctx, func(ctx context.Context) error {
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
		l.renewed = time.Now()
	}
	l.mu.Unlock()
}

func (l *rolloutLease) seconds() int32 {
	s := int32(l.duration / time.Second)
	if s < 1 {
		s = 1
	}
	return s
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

// leaseExpiresIn is how long the lease stays valid if nobody renews it; zero or less means stale.
func leaseExpiresIn(l *coordinationv1.Lease, now time.Time) time.Duration {
	d := time.Duration(ptr.Deref(l.Spec.LeaseDurationSeconds, 0)) * time.Second
	return renewTime(l).Add(d).Sub(now)
}

// LeaseHolder says who holds the StatefulSet's rollout Lease and for how long it stays valid without
// renewal; "" when no rollout holds it (or it was never created). A holder with expiresIn <= 0 is gone.
func (e *Engine) LeaseHolder(ctx context.Context) (holder string, expiresIn time.Duration, err error) {
	l, err := e.kube.CoordinationV1().Leases(e.cfg.Namespace).Get(ctx, e.lease.name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return "", 0, nil
	}
	if err != nil {
		return "", 0, fmt.Errorf("reading lease %s: %w", e.lease.id(), err)
	}
	return ptr.Deref(l.Spec.HolderIdentity, ""), leaseExpiresIn(l, time.Now()), nil
}
