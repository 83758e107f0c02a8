package rollout

import (
	"context"
	"errors"
	"fmt"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/etcd-rollout/pulumi-etcd-rollout/rollout/internal/health"
	"github.com/etcd-rollout/pulumi-etcd-rollout/rollout/internal/member"
	"github.com/etcd-rollout/pulumi-etcd-rollout/rollout/internal/poll"
	"github.com/etcd-rollout/pulumi-etcd-rollout/rollout/internal/statefulset"
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
// when the pod is Ready. Each look also checks that nobody else changed the StatefulSet meanwhile (want: the
// partition and generation this run wrote last), so the run stops (and re-locks) at once, not at its next
// step. The pod gate looks again on every watch event; the etcd gate on its poll interval, as etcd health
// is no Kubernetes event.
//
// It returns what the gates vouch for (passage): the etcd process that passed and the pod that passed, so that
// a later look can tell whether the member restarted since or its pod was replaced.
func (e *Engine) waitMember(ctx context.Context, st ClusterState, ordinal int, want expectedSpec, since time.Time) (passage, error) {
	pod := st.Members[ordinal].Pod
	lag := &statefulset.WatchLag{}
	podGate := gateWait{pod: pod, ordinal: ordinal, gate: GatePodReady, timeout: e.cfg.ReadyTimeout, since: since, onEvents: true}
	var reason ProblemReason
	if err := e.poll(ctx, podGate, func(ctx context.Context) (bool, string, error) {
		if pending, err := e.checkUnchanged(ctx, st, pod, want, lag); err != nil || pending != "" {
			return false, pending, err
		}
		ok, seen, r := e.podAtRevision(ctx, pod, want.podRevision(st), true)
		reason = r
		return ok, seen, nil
	}); err != nil {
		return passage{}, e.unseenIfUnread(ctx, withReason(err, reason))
	}
	rev := want.podRevision(st)
	witness := &health.PodWitness{} // from the pod the gate just saw Ready on
	e.sts.WitnessPod(ctx, pod, witness)
	stable := &health.Stability{StableFor: e.stableFor, IncarnationOf: func(ctx context.Context) (Incarnation, error) { return e.etcd.Incarnation(ctx, pod) }}
	window := fmt.Sprintf("healthy without a break for %s: the first member on %s proves it does not crash-loop", e.stableFor, rev)
	if e.proven.Has(rev) && !want.FullWindow {
		stable.StableFor, window = 0, "one healthy look: "+rev+" proved itself on an earlier member"
	}
	readyAfter := time.Since(since)
	e.announce(Event{Kind: EventMemberReady, Step: Step{Kind: StepWaitMember, Ordinal: ordinal}, Pod: pod, Elapsed: readyAfter},
		"%s is Ready at %s after %s; checking etcd health (%s)", pod, rev, readyAfter.Round(10*time.Millisecond), window)
	etcdGate := gateWait{pod: pod, ordinal: ordinal, gate: GateEtcdHealth, timeout: e.cfg.HealthTimeout, since: time.Now()}
	var last health.Look
	podFell := false
	err := e.poll(ctx, etcdGate, func(ctx context.Context) (bool, string, error) {
		if pending, err := e.checkUnchanged(ctx, st, pod, want, lag); err != nil || pending != "" {
			return false, pending, err
		}
		// The pod is witnessed before the look and again at the pass: only the pod the gate saw Ready at rev,
		// up without a break, proves anything (a replaced one runs whatever revision the controller gave it).
		for _, passing := range []bool{false, true} {
			broke, err := e.sts.Rewitness(ctx, pod, witness)
			if err != nil {
				return false, "", err
			}
			if broke != "" {
				podFell, last = true, health.Look{Seen: "the kubelet says " + broke}
				return stable.Observe(ctx, last)
			}
			if !passing {
				last = e.memberHealthy(ctx, st, ordinal)
				if ok, seen, err := stable.Observe(ctx, last); !ok || err != nil {
					return ok, seen, err
				}
			}
		}
		broke, pending, err := e.sts.ConfirmWitness(ctx, pod, witness)
		if broke != "" {
			podFell, last, *witness = true, health.Look{Seen: "the kubelet says " + broke}, health.PodWitness{}
			e.sts.WitnessPod(ctx, pod, witness)
			return stable.Observe(ctx, last)
		}
		if pending != "" || err != nil {
			return false, pending, err
		}
		return true, "", nil
	})
	var timeout *GateTimeoutError
	if errors.As(err, &timeout) {
		timeout.PodStayedUp, timeout.Reason = witness.StayedUp() && !podFell, last.Reason
	}
	if timeout != nil && timeout.PodStayedUp && (last.NoLook || !stable.Verdict()) {
		// The gate ended on a look that never reached etcd, or its looks never judged the member (healthy since
		// it started, with looks between that reached neither it nor its leader: the schedule checker's seed
		// 2046 of ROLLOUT_SCHEDULE_FROM=2000, a leader refusing us), while the kubelet kept the pod Ready:
		// nothing says the member failed, and it may be healthy and voting. That is no verdict on the
		// revision, and no ground to delete its pod. (A pod that went not Ready or restarted meanwhile did
		// not stay up.)
		why := fmt.Sprintf("the last look never reached its etcd (%s)", last.Seen)
		if !last.NoLook {
			why = fmt.Sprintf("no look found it failing by its own answer since it first answered healthy, only looks that did not reach it or its leader (last seen: %s)", last.Seen)
		}
		return passage{}, fmt.Errorf("%w: %s did not pass the %s gate within %s and %s; it may be healthy, so nothing was deleted: check the port-forward path to it (API server, kubelet), then run again",
			ErrMemberUnseen, pod, GateEtcdHealth, e.cfg.HealthTimeout, why)
	}
	if err != nil {
		return passage{}, err
	}
	e.proven.Add(rev)
	return passage{incarnation: stable.Incarnation, witness: *witness}, nil
}

// staysUp watches member ordinal until it has been healthy, in one etcd process, for the stability window (the
// first member's etcd gate, without the pod gate: its pod is not ours to wait for), the health timeout passes,
// or it breaks once: a member seen falling or restarting while it is watched is flapping, whatever a later
// stretch shows (the schedule checker's seed 16110 of 100,000: a slow crash loop fell during the watch, then
// stayed up for the window, and a second pod was deleted). It returns the process that stayed up (zero when
// etcd does not name it) and what it last saw.
func (e *Engine) staysUp(ctx context.Context, st ClusterState, ordinal int) (Incarnation, string, error) {
	pod := st.Members[ordinal].Pod
	stable := &health.Stability{StableFor: e.stableFor, IncarnationOf: func(ctx context.Context) (Incarnation, error) { return e.etcd.Incarnation(ctx, pod) }}
	seen, err := poll.Until(ctx, time.Now().Add(e.cfg.HealthTimeout), poll.Every(e.pollEvery), func(ctx context.Context) (string, bool, error) {
		cctx, cancel := context.WithTimeout(ctx, memberCallTimeout)
		defer cancel()
		l := e.memberHealthy(cctx, st, ordinal)
		ok, seen, err := stable.Observe(cctx, l)
		if err == nil && (stable.Breaks > 0 || (!l.OK && !l.NoLook)) {
			// Down by its own answer, before a stretch began as much as during one: the member is watched
			// because it should be up (the schedule checker's seed 99795 of 100,000: a slow crash loop was down
			// at the watch's first looks, then up for the window, and a second pod was deleted).
			err = errFlapped
		}
		return seen, ok, err
	})
	if err != nil {
		return Incarnation{}, seen, err
	}
	return stable.Incarnation, "", nil
}

// processOf reads which etcd process serves pod now (its Incarnation), within one member call's time.
func (e *Engine) processOf(ctx context.Context, pod string) (Incarnation, error) {
	cctx, cancel := context.WithTimeout(ctx, memberCallTimeout)
	defer cancel()
	return e.etcd.Incarnation(cctx, pod)
}

// errFlapped is staysUp's answer for a member that broke a healthy stretch while it was watched.
var errFlapped = errors.New("it fell or restarted while it was watched")

// unseenIfUnread turns a pod gate that ran out while the API server did not answer into ErrMemberUnseen: the
// gate judged the watch's last word on the pod, which stops changing while the API server is away, and a gate
// that ran out on it is no verdict on the revision (issue 31's audit 5d: an outage longer than the ready
// timeout got a revision blamed and its member reverted). A direct GET at the timeout tells the two apart:
// one that answers lets the timeout stand.
func (e *Engine) unseenIfUnread(ctx context.Context, err error) error {
	var timeout *GateTimeoutError
	if !errors.As(err, &timeout) || ctx.Err() != nil {
		return err
	}
	gctx, cancel := context.WithTimeout(ctx, memberCallTimeout)
	defer cancel()
	_, gerr := e.kube.CoreV1().Pods(e.cfg.Namespace).Get(gctx, timeout.Pod, metav1.GetOptions{})
	if gerr == nil || apierrors.IsNotFound(gerr) {
		return err
	}
	return fmt.Errorf("%w: %s did not pass the %s gate within %s, and the API server does not answer for its pod (%v); last seen: %s; nothing says the revision failed, so nothing was reverted: run again once the API server answers",
		ErrMemberUnseen, timeout.Pod, timeout.Gate, timeout.Timeout, gerr, timeout.LastSeen)
}

// passage is what a member's passed gates vouch for: the etcd process that passed (zero when etcd did not say),
// and the kubelet's account of the pod that passed, up without a break from its pod gate to the pass. The
// run's watch of the member after it passed starts from these, not from a look taken afterwards, which a pod
// replaced in between would fool.
type passage struct {
	incarnation Incarnation
	witness     health.PodWitness
}

// waitPodRecreated blocks until the StatefulSet controller has replaced the member's pod with one at the
// update revision (not yet Ready): the moment the partition may be locked again. It counts against the pod
// gate's ready timeout from since.
func (e *Engine) waitPodRecreated(ctx context.Context, st ClusterState, ordinal int, want expectedSpec, since time.Time) error {
	pod := st.Members[ordinal].Pod
	lag := &statefulset.WatchLag{}
	podGate := gateWait{pod: pod, ordinal: ordinal, gate: GatePodReady, timeout: e.cfg.ReadyTimeout, since: since, onEvents: true}
	var reason ProblemReason
	err := e.poll(ctx, podGate, func(ctx context.Context) (bool, string, error) {
		if pending, err := e.checkUnchanged(ctx, st, pod, want, lag); err != nil || pending != "" {
			return false, pending, err
		}
		ok, seen, r := e.podAtRevision(ctx, pod, want.podRevision(st), false)
		reason = r
		return ok, seen, nil
	})
	err = withReason(err, reason)
	var timeout *GateTimeoutError
	if errors.As(err, &timeout) {
		if p, rerr := e.sts.ReadPod(ctx, pod); rerr == nil && string(p.UID) == st.Members[ordinal].PodUID && p.DeletionTimestamp == nil &&
			p.Labels[appsv1.ControllerRevisionHashLabelKey] != want.podRevision(st) {
			// The controller never touched the pod: no pod ran the revision, so it cannot have failed.
			return fmt.Errorf("%w: the StatefulSet controller did not replace %s within %s of the partition being lowered (it is still the pod observed before, at revision %s); nothing is reverted, as nothing ran the new revision: look at why the controller holds (a pod not Running and Ready under OrderedReady, the controller manager's logs), then run again",
				ErrNotRecreated, pod, e.cfg.ReadyTimeout, p.Labels[appsv1.ControllerRevisionHashLabelKey])
		}
	}
	return err
}

// expectedSpec is what the StatefulSet looks like after this run's own last write.
type expectedSpec struct {
	Partition  int
	Generation int64
	// PodRevision is the revision the member's pod must reach: the update revision unless set (a revert
	// waits for the current one).
	PodRevision string
	// FullWindow makes the etcd gate ask for the whole stability window even on a revision another member
	// proved: for a member this run did not restart.
	FullWindow bool
}

func (w expectedSpec) podRevision(st ClusterState) string {
	if w.PodRevision != "" {
		return w.PodRevision
	}
	return st.UpdateRevision
}

// checkUnchanged reads the StatefulSet and returns an ErrInterference error when its partition, generation
// or updateRevision is not what this run left. It reads the watch's cache, which lags this run's own writes:
// until the cache has seen the generation this run wrote last, it gives no verdict (pending says so, and the
// gate waits for the next event rather than pass or fail), and after statefulset.WatchLagLimit it reads with a GET. A
// GET that fails is not a verdict either: the gate looks again.
func (e *Engine) checkUnchanged(ctx context.Context, st ClusterState, pod string, want expectedSpec, lag *statefulset.WatchLag) (pending string, err error) {
	sts, waiting := e.sts.FromWatch(want.Generation, lag)
	if waiting {
		return "waiting for the StatefulSet watch to deliver this run's last partition write", nil
	}
	if sts == nil {
		if sts, err = e.kube.AppsV1().StatefulSets(e.cfg.Namespace).Get(ctx, e.cfg.StatefulSet, metav1.GetOptions{}); err != nil {
			return "", nil
		}
	}
	now := stsState(sts)
	genChanged := want.Generation != 0 && sts.Generation != want.Generation
	revChanged := now.UpdateRevision != "" && now.UpdateRevision != st.UpdateRevision
	if now.Partition != want.Partition || genChanged || revChanged {
		return "", fmt.Errorf("%w while waiting for %s: partition %d (this run set %d), generation %d (expected %d), updateRevision %q (started with %q); stopping rather than racing it: find who changed it (the StatefulSet's managedFields name the writer), then run again",
			ErrInterference, pod, now.Partition, want.Partition, sts.Generation, want.Generation, sts.Status.UpdateRevision, st.UpdateRevision)
	}
	return "", nil
}

// gateWait is one gate's wait: for which pod, which gate, and its timeout counted from since. onEvents makes
// it look again on every watch event as well as every poll interval: for gates that wait for the Kubernetes
// objects themselves, so a member's gate passes the moment its pod changes, not up to an interval later.
type gateWait struct {
	pod, gate string
	ordinal   int
	timeout   time.Duration
	since     time.Time
	onEvents  bool
}

// stillWaitingEvery is how often a gate that has not passed says what it last saw: a wait that ends in a
// timeout already carries it, but one that passes after a long stall would otherwise leave no trace of why.
const stillWaitingEvery = 5 * time.Second

// poll runs check until it passes, fails for good (its error), the gate's timeout passes (a
// *GateTimeoutError carrying the last thing seen), or ctx ends.
func (e *Engine) poll(ctx context.Context, g gateWait, check func(context.Context) (bool, string, error)) error {
	lastSeen := "nothing yet"
	var (
		event       <-chan struct{} // taken before each look, so an event during it is not missed
		checkFailed bool
	)
	report := e.stillWaiting(g)
	_, err := poll.Until(ctx, g.since.Add(g.timeout), func(ctx context.Context) error {
		report(lastSeen)
		return e.waitForChange(ctx, event)
	}, func(ctx context.Context) (struct{}, bool, error) {
		if g.onEvents {
			event = e.watch.Changes()
		}
		cctx, cancel := context.WithTimeout(ctx, memberCallTimeout)
		defer cancel()
		ok, seen, err := check(cctx)
		if seen != "" {
			lastSeen = seen
		}
		checkFailed = err != nil
		return struct{}{}, ok, err
	})
	switch {
	case err == nil || checkFailed:
		return err
	case errors.Is(err, poll.ErrWaitedOut):
		return &GateTimeoutError{Pod: g.pod, Gate: g.gate, Timeout: g.timeout, LastSeen: lastSeen}
	}
	return fmt.Errorf("waiting for %s (%s gate, last seen: %s): %w", g.pod, g.gate, lastSeen, err)
}

// stillWaiting returns what poll calls between looks to say, every stillWaitingEvery, what the gate last saw.
func (e *Engine) stillWaiting(g gateWait) func(lastSeen string) {
	started := time.Now()
	deadline := g.since.Add(g.timeout)
	next := started.Add(e.stillWaitingEvery)
	return func(lastSeen string) {
		now := time.Now()
		if now.Before(next) {
			return
		}
		e.emit(Step{Kind: StepWaitMember, Ordinal: g.ordinal}, "still waiting for %s (%s gate, %s so far, %s left): %s",
			g.pod, g.gate, now.Sub(started).Round(time.Second), deadline.Sub(now).Round(time.Second), lastSeen)
		next = now.Add(e.stillWaitingEvery)
	}
}

// waitForChange returns at the event, after the poll interval, or when ctx ends (its cause).
func (e *Engine) waitForChange(ctx context.Context, event <-chan struct{}) error {
	t := time.NewTimer(e.pollEvery)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return context.Cause(ctx)
	case <-event:
	case <-t.C:
	}
	return nil
}

// podAtRevision says whether the pod exists at revision (and, with needReady, is Ready), or what it is
// instead, and why when that is a problem.
func (e *Engine) podAtRevision(ctx context.Context, pod, revision string, needReady bool) (bool, string, ProblemReason) {
	p, err := e.sts.ReadPod(ctx, pod)
	if apierrors.IsNotFound(err) {
		return false, "pod does not exist (being recreated)", ProblemPodMissing
	}
	if err != nil {
		return false, "reading pod: " + err.Error(), problemOf(err)
	}
	rev := p.Labels[appsv1.ControllerRevisionHashLabelKey]
	switch {
	case p.DeletionTimestamp != nil:
		return false, fmt.Sprintf("pod is terminating (revision %s)", rev), ProblemPodTerminating
	case rev != revision:
		return false, fmt.Sprintf("pod at revision %s, want %s", rev, revision), ProblemNone
	case needReady && !health.PodReady(p):
		return false, fmt.Sprintf("pod at revision %s, phase %s, not Ready", rev, p.Status.Phase), ProblemNone
	}
	return true, "", ProblemNone
}

// memberHealthy is the etcd gate: the member answers Status without alarms and is not a learner; the
// member list has every replica as a voter and no learner; its applied index has caught up with the
// leader's committed index; a linearizable read through it succeeds.
func (e *Engine) memberHealthy(ctx context.Context, st ClusterState, ordinal int) health.Look {
	pod := st.Members[ordinal].Pod
	s, err := e.etcd.Status(ctx, pod)
	if err != nil {
		return failedLook(err)
	}
	switch {
	case len(s.Errors) > 0:
		return health.Look{Seen: fmt.Sprintf("etcd reports %v", s.Errors)}
	case s.IsLearner:
		return health.Look{Seen: "member is a learner"}
	case s.Leader == 0:
		return health.Look{Seen: "member sees no leader"}
	}
	list, err := e.etcd.MemberList(ctx, pod)
	if err != nil {
		return failedLook(err)
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
		return health.Look{Seen: fmt.Sprintf("member list has %d voters and %d learners (want %d voters, member %x among them)", voters, learners, st.Replicas, s.ID)}
	}
	leaderIndex := s.RaftIndex
	if s.Leader != s.ID {
		leaderPod, err := e.podOfMember(ctx, st, s.Leader)
		if err != nil {
			return failedLook(err)
		}
		ls, err := e.etcd.Status(ctx, leaderPod)
		if err != nil {
			// The leader did not answer us: that says nothing of this member, which answered (the schedule
			// checker's seed 2046 of ROLLOUT_SCHEDULE_FROM=2000: a leader whose client port refused us for a
			// second got a healthy canary reverted). No verdict on the member: a look that did not reach it.
			// A leader down by its own answer is a verdict on the leader, though: the run hears of it
			// (the schedule checker's seed 3496 of 10,000 with members whose data dies with their pod: a leader
			// that passed and crash-looped, seen down by a canary's gate, was reported rolled).
			if e.leaderSeenDown != nil && !member.CouldNotLook(err) {
				e.leaderSeenDown(leaderPod)
			}
			return health.Look{Seen: fmt.Sprintf("leader %s: %v", leaderPod, err), NoLook: true, Reason: problemOf(err)}
		}
		leaderIndex = ls.RaftIndex
		// Sample the member again after the leader, so "caught up" compares a later applied index with an
		// earlier committed one.
		if s, err = e.etcd.Status(ctx, pod); err != nil {
			return failedLook(err)
		}
	}
	if s.AppliedIndex+appliedIndexSlack < leaderIndex {
		return health.Look{Seen: fmt.Sprintf("applied index %d trails the leader's committed index %d", s.AppliedIndex, leaderIndex)}
	}
	if err := e.etcd.LinearizableRead(ctx, pod); err != nil {
		return failedLook(err)
	}
	return health.Look{OK: true}
}

// failedLook is the look that err ended.
func failedLook(err error) health.Look {
	return health.Look{Seen: err.Error(), NoLook: member.CouldNotLook(err), Reason: problemOf(err)}
}

// podOfMember finds the pod serving an etcd member ID: from the observation when the ID is known there,
// else by asking every member. When a member did not answer, the ID may be that member's: the look did not
// reach the leader, which says nothing of the member that named it (member.ErrNoLook; the schedule checker's
// seed 4322 of 10,000 failed a healthy member whose leader could not be reached through its port-forward).
func (e *Engine) podOfMember(ctx context.Context, st ClusterState, id uint64) (string, error) {
	for _, m := range st.Members {
		if m.Reachable && m.MemberID == id {
			return m.Pod, nil
		}
	}
	var unanswered []string
	for _, m := range st.Members {
		s, err := e.etcd.Status(ctx, m.Pod)
		if err == nil && s.ID == id {
			return m.Pod, nil
		}
		if err != nil {
			unanswered = append(unanswered, m.Pod)
		}
	}
	if len(unanswered) > 0 {
		return "", fmt.Errorf("%w: no member that answers is %x, the leader it names, and %v did not answer", member.ErrNoLook, id, unanswered)
	}
	return "", fmt.Errorf("no pod serves member %x", id)
}

// withReason gives a gate's timeout the reason of its last look.
func withReason(err error, reason ProblemReason) error {
	var timeout *GateTimeoutError
	if errors.As(err, &timeout) {
		timeout.Reason = reason
	}
	return err
}
