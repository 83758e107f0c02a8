package rollout

import (
	"context"
	"errors"
	"fmt"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/etcd-rollout/pulumi-etcd-rollout/rollout/internal/kubeapi"
	"github.com/etcd-rollout/pulumi-etcd-rollout/rollout/internal/poll"
)

// relockTimeout bounds the re-lock on the way out; it runs on a fresh context so a cancelled caller still
// gets its StatefulSet locked again.
const relockTimeout = 30 * time.Second

// relock sets the partition back to the StatefulSet's current replicas on a fresh context, retrying
// briefly (an API server restart should not leave the StatefulSet unlocked). Each try first makes sure this
// run still holds the lease, and writes only within it: an exit after an outage longer than the lease may find
// another run holding it, rolling, and a re-lock then would break that run's roll (issue 31's audit: the exit
// read the lease once, took an unreadable one for its own, and retried its write for 30 s). A lease that
// cannot be read is nobody's yet: the try waits for it. One another run holds ends the re-lock: the
// StatefulSet is that run's to lock.
func (e *Engine) relock(ctx context.Context) error {
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), relockTimeout)
	defer cancel()
	last, err := poll.Until(rctx, time.Time{}, poll.Every(time.Second), func(ctx context.Context) (error, bool, error) {
		if err := e.lease.Confirm(ctx); err != nil {
			if holder := e.lease.NewHolder(); holder != "" {
				err = fmt.Errorf("not re-locking it: %s holds lease %s now, so the StatefulSet is that run's to lock", holder, e.lease.ID())
				return err, false, err
			}
			return err, false, nil
		}
		wctx, wcancel := e.lease.Within(ctx)
		defer wcancel()
		sts, err := e.kube.AppsV1().StatefulSets(e.cfg.Namespace).Get(wctx, e.cfg.StatefulSet, metav1.GetOptions{})
		if err == nil {
			replicas := 1
			if sts.Spec.Replicas != nil {
				replicas = int(*sts.Spec.Replicas)
			}
			if _, err = e.sts.SetPartition(wctx, replicas); err == nil {
				return nil, true, nil
			}
		}
		if kubeapi.Permanent(err) {
			return err, false, err // forbidden, not found, invalid: waiting does not change the answer
		}
		return err, false, nil
	})
	switch {
	case err == nil:
		return nil
	case e.lease.NewHolder() != "":
		return fmt.Errorf("%w: %w", ErrPartitionNotLocked, last)
	}
	return fmt.Errorf("%w: re-locking %s/%s failed, run `etcd-rollout unlock`: %w", ErrPartitionNotLocked, e.cfg.Namespace, e.cfg.StatefulSet, last)
}

// Unlock sets the partition back to replicas and releases the Lease when its holder is gone. It refuses,
// naming the holder, while another rollout still renews the Lease.
func (e *Engine) Unlock(ctx context.Context) error {
	st, err := e.lease.Acquire(ctx)
	if err != nil {
		return err
	}
	if st.TookOverFrom != "" {
		e.announce(Event{Kind: EventTookOver, PreviousHolder: st.TookOverFrom}, "took over the stale lease of %s", st.TookOverFrom)
	}
	relockErr := e.relock(ctx)
	return errors.Join(relockErr, e.lease.Release(ctx))
}
