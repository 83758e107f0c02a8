package harness

import (
	"context"
	"fmt"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	"k8s.io/apimachinery/pkg/util/wait"
)

// MoveLeader makes the member of ordinal the Raft leader (MoveLeader sent to the current leader, as the
// engine does) and waits until every member agrees. Tests and benchmarks use it to place the leader before
// a roll.
func (e *Etcd) MoveLeader(ctx context.Context, ordinal int) error {
	leader, _, err := e.Leader(ctx)
	if err != nil {
		return err
	}
	if leader == ordinal {
		return nil
	}
	target, err := e.Status(ctx, ordinal)
	if err != nil {
		return err
	}
	cli, err := e.Client(ctx, leader)
	if err != nil {
		return err
	}
	defer cli.Close()
	if _, err := cli.MoveLeader(ctx, target.MemberID); err != nil {
		return fmt.Errorf("moving the leader of %s/%s from %s to %s: %w", e.Namespace, e.Spec.Name, e.PodName(leader), e.PodName(ordinal), err)
	}
	return wait.PollUntilContextTimeout(ctx, 20*time.Millisecond, 10*time.Second, true, func(ctx context.Context) (bool, error) {
		l, _, err := e.Leader(ctx)
		return err == nil && l == ordinal, nil
	})
}

// WaitRolledOut waits until the StatefulSet controller has finished what the partition allows — every pod at
// or above the partition carries status.updateRevision — and the cluster is healthy. With partition 0 this
// is the end of a default StatefulSet rollout, the baseline the engine is measured against.
func (e *Etcd) WaitRolledOut(ctx context.Context, timeout time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	var last string
	err := wait.PollUntilContextCancel(ctx, 50*time.Millisecond, true, func(ctx context.Context) (bool, error) {
		sts, err := e.StatefulSet(ctx)
		if err != nil {
			return false, err
		}
		partition := 0
		if ru := sts.Spec.UpdateStrategy.RollingUpdate; ru != nil && ru.Partition != nil {
			partition = int(*ru.Partition)
		}
		for i := partition; i < e.Spec.Replicas; i++ {
			pod, err := e.Pod(ctx, i)
			if err != nil {
				last = err.Error()
				return false, nil
			}
			if rev := pod.Labels[appsv1.ControllerRevisionHashLabelKey]; rev != sts.Status.UpdateRevision || !podReady(pod) {
				last = fmt.Sprintf("%s at %s (want %s), ready %v", pod.Name, rev, sts.Status.UpdateRevision, podReady(pod))
				return false, nil
			}
		}
		if err := e.checkHealthy(ctx); err != nil {
			last = err.Error()
			return false, nil
		}
		return true, nil
	})
	if err != nil {
		return fmt.Errorf("waiting for %s/%s to roll out: %w (last: %s)", e.Namespace, e.Spec.Name, err, last)
	}
	return nil
}
