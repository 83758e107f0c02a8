package rollout

import (
	"context"
	"errors"
	"fmt"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// relockTimeout bounds the re-lock on the way out; it runs on a fresh context so a cancelled caller still
// gets its StatefulSet locked again.
const relockTimeout = 30 * time.Second

// relock sets the partition back to the StatefulSet's current replicas on a fresh context, retrying
// briefly (an API server restart should not leave the StatefulSet unlocked).
func (e *Engine) relock(ctx context.Context) error {
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), relockTimeout)
	defer cancel()
	last, err := waitFor(rctx, time.Time{}, every(time.Second), func(ctx context.Context) (error, bool, error) {
		sts, err := e.kube.AppsV1().StatefulSets(e.cfg.Namespace).Get(ctx, e.cfg.StatefulSet, metav1.GetOptions{})
		if err == nil {
			replicas := 1
			if sts.Spec.Replicas != nil {
				replicas = int(*sts.Spec.Replicas)
			}
			if _, err = e.setPartition(ctx, replicas); err == nil {
				return nil, true, nil
			}
		}
		if permanent(err) {
			return err, false, err // forbidden, not found, invalid: waiting does not change the answer
		}
		return err, false, nil
	})
	if err == nil {
		return nil
	}
	return fmt.Errorf("%w: re-locking %s/%s failed, run `etcd-rollout unlock`: %w", ErrPartitionNotLocked, e.cfg.Namespace, e.cfg.StatefulSet, last)
}

// Unlock sets the partition back to replicas and releases the Lease when its holder is gone. It refuses,
// naming the holder, while another rollout still renews the Lease.
func (e *Engine) Unlock(ctx context.Context) error {
	st, err := e.lease.acquire(ctx)
	if err != nil {
		return err
	}
	if st.TookOverFrom != "" {
		e.announce(Event{Kind: EventTookOver, PreviousHolder: st.TookOverFrom}, "took over the stale lease of %s", st.TookOverFrom)
	}
	relockErr := e.relock(ctx)
	return errors.Join(relockErr, e.lease.release(ctx))
}
