package rollout

import (
	"context"
	"fmt"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// appliedIndexSlack is how far a member's applied index may trail the leader's committed index sampled
// just before it and still count as caught up: a few entries that commit while we look.
const appliedIndexSlack = 32

// Gate names, as they appear in GateTimeoutError.
const (
	GatePodReady   = "pod ready"
	GateEtcdHealth = "etcd health"
)

// waitMember blocks until the member passes both gates: its pod at updateRevision and Ready (pod Ready
// only says the container started), then etcd's word that it is a healthy, caught-up voter. The pod gate
// has the ready timeout from since (when the member was disrupted), the etcd gate the health timeout from
// when the pod is Ready. Each poll also checks that nobody else changed the StatefulSet meanwhile (want: the
// partition and generation this run wrote last), so the run stops (and re-locks) at once, not at its next
// step.
func (e *Engine) waitMember(ctx context.Context, st ClusterState, ordinal int, want expectedSpec, since time.Time) error {
	pod := st.Members[ordinal].Pod
	if err := e.poll(ctx, pod, GatePodReady, e.cfg.ReadyTimeout, since, func(ctx context.Context) (bool, string, error) {
		if err := e.checkUnchanged(ctx, st, pod, want); err != nil {
			return false, "", err
		}
		ok, seen := e.podAtRevision(ctx, pod, want.podRevision(st), true)
		return ok, seen, nil
	}); err != nil {
		return err
	}
	e.emit(Step{Kind: StepWaitMember, Ordinal: ordinal}, "%s is Ready at %s after %s; checking etcd health", pod, want.podRevision(st), time.Since(since).Round(10*time.Millisecond))
	stable := &stability{stableFor: e.stableFor}
	return e.poll(ctx, pod, GateEtcdHealth, e.cfg.HealthTimeout, time.Now(), func(ctx context.Context) (bool, string, error) {
		if err := e.checkUnchanged(ctx, st, pod, want); err != nil {
			return false, "", err
		}
		ok, seen := e.memberHealthy(ctx, st, ordinal)
		return stable.observe(ok, seen)
	})
}

// waitPodRecreated blocks until the StatefulSet controller has replaced the member's pod with one at the
// update revision (not yet Ready): the moment the partition may be locked again. It counts against the pod
// gate's ready timeout from since.
func (e *Engine) waitPodRecreated(ctx context.Context, st ClusterState, ordinal int, want expectedSpec, since time.Time) error {
	pod := st.Members[ordinal].Pod
	return e.poll(ctx, pod, GatePodReady, e.cfg.ReadyTimeout, since, func(ctx context.Context) (bool, string, error) {
		if err := e.checkUnchanged(ctx, st, pod, want); err != nil {
			return false, "", err
		}
		ok, seen := e.podAtRevision(ctx, pod, want.podRevision(st), false)
		return ok, seen, nil
	})
}

// expectedSpec is what the StatefulSet looks like after this run's own last write.
type expectedSpec struct {
	Partition  int
	Generation int64
	// PodRevision is the revision the member's pod must reach: the update revision unless set (a revert
	// waits for the current one).
	PodRevision string
}

func (w expectedSpec) podRevision(st ClusterState) string {
	if w.PodRevision != "" {
		return w.PodRevision
	}
	return st.UpdateRevision
}

// checkUnchanged reads the StatefulSet and returns an ErrInterference error when its partition, generation
// or updateRevision is not what this run left. A read that fails is not a verdict: the gate polls again.
func (e *Engine) checkUnchanged(ctx context.Context, st ClusterState, pod string, want expectedSpec) error {
	sts, err := e.kube.AppsV1().StatefulSets(e.cfg.Namespace).Get(ctx, e.cfg.StatefulSet, metav1.GetOptions{})
	if err != nil {
		return nil
	}
	now := stsState(sts)
	genChanged := want.Generation != 0 && sts.Generation != want.Generation
	revChanged := now.UpdateRevision != "" && now.UpdateRevision != st.UpdateRevision
	if now.Partition != want.Partition || genChanged || revChanged {
		return fmt.Errorf("%w while waiting for %s: partition %d (this run set %d), generation %d (expected %d), updateRevision %q (started with %q); stopping rather than racing it: find who changed it (the StatefulSet's managedFields name the writer), then run again",
			ErrInterference, pod, now.Partition, want.Partition, sts.Generation, want.Generation, sts.Status.UpdateRevision, st.UpdateRevision)
	}
	return nil
}

// poll runs check until it passes, fails for good (its error), the gate's timeout counted from since passes
// (a *GateTimeoutError carrying the last thing seen), or ctx ends.
func (e *Engine) poll(ctx context.Context, pod, gate string, timeout time.Duration, since time.Time, check func(context.Context) (bool, string, error)) error {
	deadline := since.Add(timeout)
	lastSeen := "nothing yet"
	for {
		cctx, cancel := context.WithTimeout(ctx, memberCallTimeout)
		ok, seen, err := check(cctx)
		cancel()
		if err != nil {
			return err
		}
		if ok {
			return nil
		}
		if seen != "" {
			lastSeen = seen
		}
		if err := context.Cause(ctx); err != nil {
			return fmt.Errorf("waiting for %s (%s gate, last seen: %s): %w", pod, gate, lastSeen, err)
		}
		if time.Now().After(deadline) {
			return &GateTimeoutError{Pod: pod, Gate: gate, Timeout: timeout, LastSeen: lastSeen}
		}
		select {
		case <-ctx.Done():
		case <-time.After(e.pollEvery):
		}
	}
}

// podAtRevision says whether the pod exists at revision (and, with needReady, is Ready), or what it is
// instead.
func (e *Engine) podAtRevision(ctx context.Context, pod, revision string, needReady bool) (bool, string) {
	p, err := e.kube.CoreV1().Pods(e.cfg.Namespace).Get(ctx, pod, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return false, "pod does not exist (being recreated)"
	}
	if err != nil {
		return false, "reading pod: " + err.Error()
	}
	rev := p.Labels[appsv1.ControllerRevisionHashLabelKey]
	switch {
	case p.DeletionTimestamp != nil:
		return false, fmt.Sprintf("pod is terminating (revision %s)", rev)
	case rev != revision:
		return false, fmt.Sprintf("pod at revision %s, want %s", rev, revision)
	case needReady && !podReady(p):
		return false, fmt.Sprintf("pod at revision %s, phase %s, not Ready", rev, p.Status.Phase)
	}
	return true, ""
}

// memberHealthy is the etcd gate: the member answers Status without alarms and is not a learner; the
// member list has every replica as a voter and no learner; its applied index has caught up with the
// leader's committed index; a linearizable read through it succeeds.
func (e *Engine) memberHealthy(ctx context.Context, st ClusterState, ordinal int) (bool, string) {
	pod := st.Members[ordinal].Pod
	s, err := e.etcd.Status(ctx, pod)
	if err != nil {
		return false, err.Error()
	}
	switch {
	case len(s.Errors) > 0:
		return false, fmt.Sprintf("etcd reports %v", s.Errors)
	case s.IsLearner:
		return false, "member is a learner"
	case s.Leader == 0:
		return false, "member sees no leader"
	}
	list, err := e.etcd.MemberList(ctx, pod)
	if err != nil {
		return false, err.Error()
	}
	voters, learners, present := 0, 0, false
	for _, m := range list {
		if m.IsLearner {
			learners++
		} else {
			voters++
		}
		present = present || m.ID == s.ID
	}
	if !present || voters != st.Replicas || learners > 0 {
		return false, fmt.Sprintf("member list has %d voters and %d learners (want %d voters, member %x among them)", voters, learners, st.Replicas, s.ID)
	}
	leaderIndex := s.RaftIndex
	if s.Leader != s.ID {
		leaderPod, err := e.podOfMember(ctx, st, s.Leader)
		if err != nil {
			return false, err.Error()
		}
		ls, err := e.etcd.Status(ctx, leaderPod)
		if err != nil {
			return false, fmt.Sprintf("leader %s: %v", leaderPod, err)
		}
		leaderIndex = ls.RaftIndex
		// Sample the member again after the leader, so "caught up" compares a later applied index with an
		// earlier committed one.
		if s, err = e.etcd.Status(ctx, pod); err != nil {
			return false, err.Error()
		}
	}
	if s.AppliedIndex+appliedIndexSlack < leaderIndex {
		return false, fmt.Sprintf("applied index %d trails the leader's committed index %d", s.AppliedIndex, leaderIndex)
	}
	if err := e.etcd.LinearizableRead(ctx, pod); err != nil {
		return false, err.Error()
	}
	return true, ""
}

// podOfMember finds the pod serving an etcd member ID: from the observation when the ID is known there,
// else by asking every member.
func (e *Engine) podOfMember(ctx context.Context, st ClusterState, id uint64) (string, error) {
	for _, m := range st.Members {
		if m.Reachable && m.MemberID == id {
			return m.Pod, nil
		}
	}
	for _, m := range st.Members {
		if s, err := e.etcd.Status(ctx, m.Pod); err == nil && s.ID == id {
			return m.Pod, nil
		}
	}
	return "", fmt.Errorf("no pod serves member %x", id)
}
