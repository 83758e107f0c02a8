package rollout

// A run's points of no return: etcd's downgrade enabled, the snapshot stored before a step only it can undo,
// and the restart of a one-member etcd's only member, measured.

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/etcd-rollout/pulumi-etcd-rollout/rollout/internal/gate"
	"github.com/etcd-rollout/pulumi-etcd-rollout/rollout/internal/member"
	"github.com/etcd-rollout/pulumi-etcd-rollout/rollout/internal/outage"
	"github.com/etcd-rollout/pulumi-etcd-rollout/rollout/internal/planner"
	"github.com/etcd-rollout/pulumi-etcd-rollout/rollout/internal/snapshot"
)

// enableDowngrade validates and enables etcd's downgrade to the step's minor, unless a member already reports
// it enabled (an earlier run), then waits for etcd to lower the cluster version and every member's storage
// version to it.
func (r *run) enableDowngrade(ctx context.Context, st ClusterState, step Step) error {
	e, target := r.e, step.Version
	if !downgradeEnabledFor(st, target) {
		// The gate's PointOfNoReturn sequence: etcd validates the downgrade, the snapshot the plan asks for is
		// stored, and the lease is ours.
		permit, err := r.permit(ctx, gate.PointOfNoReturn, st, step, -1, nil)
		if err != nil {
			return err
		}
		pod, _ := downgradeMember(st)
		e.emit(step, "enabling etcd's downgrade to %s through %s (validate ok)", target, pod)
		r.downgrade = &downgradeRun{target: target} // set first: a lost answer may still have enabled it
		pctx, cancel := permit.Within(ctx)
		pod, err = e.downgradeCall(pctx, st, member.DowngradeEnable, target)
		cancel()
		if err != nil && !e.reportsDowngradeEnabled(ctx, st, target) {
			return fmt.Errorf("enabling etcd's downgrade to %s through %s: %w", target, pod, err)
		}
		e.record(ctx, r.uid, corev1.EventTypeNormal, ReasonDowngradeEnabled, fmt.Sprintf("Enabled etcd's downgrade to %s before restarting members on %s", target, target))
	}
	return e.awaitDowngradeReady(ctx, st, step)
}

// settleDowngrade is what a run that enabled etcd's downgrade does with it on its way out with err: before any
// member restarted it cancels the downgrade, so that the cluster goes back to where it was (cluster version
// up again); after one did it leaves the downgrade enabled, because the restarted member needs it, and says
// where the downgrade stands. The returned text is added to the run's error.
func (r *run) settleDowngrade(ctx context.Context, st ClusterState) string {
	d := r.downgrade
	if d == nil {
		return ""
	}
	if d.restarted {
		return fmt.Sprintf("etcd's downgrade to %s stays enabled: a member restarted on %s already and needs it (cancelling now would strand it); the next run resumes the downgrade", d.target, d.target)
	}
	e := r.e
	cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), downgradeCallTimeout)
	defer cancel()
	_, err := e.downgradeCall(cctx, st, member.DowngradeCancel, d.target)
	if err != nil {
		return fmt.Sprintf("etcd's downgrade to %s was enabled before any member restarted, and cancelling it failed (%v): cancel it by hand (`etcdctl downgrade cancel`) or run again to go on with it", d.target, err)
	}
	e.record(cctx, r.uid, corev1.EventTypeNormal, ReasonDowngradeCancelled, fmt.Sprintf("Cancelled etcd's downgrade to %s: the rollout stopped before any member restarted", d.target))
	e.emit(Step{Kind: StepEnableDowngrade, Version: d.target}, "cancelled etcd's downgrade to %s (no member had restarted)", d.target)
	return fmt.Sprintf("etcd's downgrade to %s was cancelled, since no member had restarted: the cluster version %s", d.target, e.clusterVersionAfterCancel(cctx, st, d.target))
}

// endLeftDowngrade is the end of a run that rolled no minor change and found etcd's downgrade enabled: a run
// that stopped before any member restarted and whose cancel failed left it so, and it holds the cluster
// version down (at the target) for as long as it stays on. The template decides: when it runs the target
// minor, there is nothing to end (its members run it, and etcd's leader ends the job itself); otherwise the
// downgrade is not wanted and is cancelled. A run never calls itself complete with the downgrade left on.
func (r *run) endLeftDowngrade(ctx context.Context, st ClusterState) error {
	e, target, wanted := r.e, downgradeTargetOf(st), templateMinor(st)
	if target == "" || isMinor(target, wanted) {
		return nil
	}
	if err := e.lease.Confirm(ctx); err != nil {
		return fmt.Errorf("not cancelling etcd's downgrade to %s: %w", target, err)
	}
	pod, err := e.downgradeCall(ctx, st, member.DowngradeCancel, target)
	if err != nil && !errors.Is(err, member.ErrNoDowngradeJob) {
		return fmt.Errorf("etcd's downgrade to %s is still enabled (an earlier run left it on; it holds the cluster version at %s) and cancelling it through %s failed: %w; cancel it by hand (`etcdctl downgrade cancel`) or run again",
			target, target, pod, err)
	}
	e.emit(Step{Kind: StepRelock}, "cancelled etcd's downgrade to %s that an earlier run left enabled (the template runs %s) through %s", target, wanted, pod)
	e.record(ctx, r.uid, corev1.EventTypeNormal, ReasonDowngradeCancelled,
		fmt.Sprintf("Cancelled etcd's downgrade to %s that an earlier run left enabled: the template runs %s", target, wanted))
	cctx, cancel := context.WithTimeout(ctx, downgradeCallTimeout)
	defer cancel()
	if seen, _ := e.versionAfterCancel(cctx, st, target); seen != "" {
		r.res.ClusterVersion = seen
	}
	return nil
}

// ErrNoSnapshot is wrapped (with ErrBlocked: nothing was restarted) when the snapshot a minor-version change
// needs before its first restart could not be taken, and Config.ProceedWithoutSnapshot does not allow going on.
var ErrNoSnapshot = errors.New("no snapshot before the point of no return")

// snapshotFirst takes the snapshot the plan asks for before the run's first step (Plan.Snapshot): once, and
// only while the run has disrupted nothing. A failed one stops the run unless the user said to go on without
// it, which the result then says.
func (r *run) snapshotFirst(ctx context.Context, st ClusterState, plan Plan) error {
	e := r.e
	if plan.Snapshot == nil || r.disrupted || r.res.Snapshot != nil || r.res.SnapshotSkipped != "" {
		return nil
	}
	began := time.Now()
	dest, err := snapshot.Parse(plan.Snapshot.To)
	if err == nil {
		var rec SnapshotRecord
		if rec, err = e.snapshotOf(ctx, st, dest, ""); err == nil {
			r.res.Snapshot = &rec
			e.announce(Event{Kind: EventSnapshotStored, Snapshot: &rec, Elapsed: time.Since(began)}, "snapshot: %s verified (%d bytes, revision %d, sha256 %s) before %s restarts",
				rec.Location, rec.Size, rec.Revision, rec.SHA256, st.Members[plan.Snapshot.Before].Pod)
			return nil
		}
	}
	if plan.Snapshot.Required {
		return fmt.Errorf("%w: %w: %s is the only member, whose data no peer holds while it restarts, and nothing was restarted: %w; fix the destination (snapshotTo: %s) and run again (proceedWithoutSnapshot does not cover a one-member restart)",
			ErrBlocked, ErrNoSnapshot, st.Members[plan.Snapshot.Before].Pod, err, plan.Snapshot.To)
	}
	if ctx.Err() != nil || !e.cfg.ProceedWithoutSnapshot {
		return fmt.Errorf("%w: %w: this roll changes etcd's minor version, after which only a snapshot rolls back, and nothing was restarted: %w; fix the destination (snapshotTo: %s) and run again, or set proceedWithoutSnapshot to go on without one",
			ErrBlocked, ErrNoSnapshot, err, plan.Snapshot.To)
	}
	r.res.SnapshotSkipped = err.Error()
	e.announce(Event{Kind: EventSnapshotSkipped}, "snapshot: going on WITHOUT one, as proceedWithoutSnapshot allows: %v", err)
	return nil
}

// outageReadEvery is how often the outage meter reads once the only member's pod is recreated: the outage is
// known to within it. outageReadTimeout bounds each read.
const (
	outageReadEvery   = 50 * time.Millisecond
	outageReadTimeout = time.Second
)

// meterOutage starts measuring the write outage of restarting a one-member etcd's only member (nil for any
// other member): one linearizable read through it first, which must pass, since the outage runs from the last
// read that did. endOutage reports it.
func (r *run) meterOutage(ctx context.Context, st ClusterState, ordinal int) (*outage.Meter, error) {
	if st.Replicas != 1 {
		return nil, nil
	}
	pod := st.Members[ordinal].Pod
	m, err := outage.Start(ctx, func(ctx context.Context) error { return r.e.etcd.LinearizableRead(ctx, pod) }, outageReadEvery, outageReadTimeout)
	if err != nil {
		return nil, fmt.Errorf("rolling %s: not restarting the only member, whose linearizable read failed right before: %w", pod, err)
	}
	return m, nil
}

// endOutage stops the meter and reports the outage in the result, on failure too: the elections the restart
// cost are its raft term now (when it is back) against termBefore. passed says the member passed its gates.
func (r *run) endOutage(ctx context.Context, m *outage.Meter, pod string, termBefore uint64, passed bool) {
	if passed {
		m.Back(ctx)
	}
	got := m.Stop()
	o := &WriteOutage{Pod: pod, LastReadBefore: got.LastBefore, FirstReadAfter: got.FirstAfter, Duration: got.Outage,
		Back: got.Back, Precision: got.Every, Elections: -1}
	if got.Back && termBefore > 0 {
		if term, ok := r.termOf(ctx, pod); ok && term >= termBefore {
			o.Elections = int(term - termBefore)
		}
	}
	r.res.WriteOutage = o
	r.e.announce(Event{Kind: EventWriteOutage, Pod: pod, Elapsed: o.Duration, WriteOutage: o}, "%s", o)
}

// addOwnElections adds to the write outage's elections those of a later restart of the only member by this run
// (a revert): its term now against termBefore, once it is back. One that cannot be read makes the count
// unknown (-1), never a guess.
func (r *run) addOwnElections(ctx context.Context, pod string, termBefore uint64, back bool) {
	o := r.res.WriteOutage
	if o == nil || o.Elections < 0 {
		return
	}
	if back && termBefore > 0 {
		if term, ok := r.termOf(ctx, pod); ok && term >= termBefore {
			o.Elections += int(term - termBefore)
			return
		}
	}
	o.Elections = -1
}

// termOf is pod's raft term by its own word, within one member call's time: the caller's context may have
// ended (a run's exit measures with context.WithoutCancel), and a member that stalls must not hold it. A look
// that finds the member down by its own answer is heard like a gate's (sawDown): it passed, and did not stay
// up (the schedule checker's seed 78788 of 100,000: a one-member run read the term of etcd-0 right after it
// passed, found it crashed, and still reported it rolled).
func (r *run) termOf(ctx context.Context, pod string) (uint64, bool) {
	cctx, cancel := context.WithTimeout(ctx, memberCallTimeout)
	defer cancel()
	s, err := r.e.etcd.Status(cctx, pod)
	if err != nil && !member.CouldNotLook(err) {
		r.sawDown(pod)
	}
	return s.RaftTerm, err == nil
}

// ErrMembershipChanged is returned when etcd's member list lists a member this run did not start with once a
// member runs the new minor version: etcd 3.6 rebuilds membership from its v3 store, and members removed
// long ago can come back from a stale v2 store (etcd-io/etcd#20967, open and critical). Going on would count
// quorum over members nobody runs; no step of the rollout's fixes it.
var ErrMembershipChanged = errors.New("etcd's member list changed during a minor version change")

// checkNoNewMembers compares etcd's member list, once a member runs the new minor by its own word, with the one
// this run first read: a peer URL it did not list then is refused. A replacement keeps its member's peer URL
// (a new ID on the same URL), so only a member nobody rolled can add one.
func (r *run) checkNoNewMembers(st ClusterState) error {
	if !st.MembershipKnown {
		return nil
	}
	if r.startPeers == nil {
		r.startPeers = map[string]bool{}
		for _, m := range st.Membership {
			for _, u := range m.PeerURLs {
				r.startPeers[u] = true
			}
		}
		return nil
	}
	mv := r.versionMove
	if mv == nil || !anyRunsMinor(st, mv.To) {
		return nil
	}
	for _, m := range st.Membership {
		for _, u := range m.PeerURLs {
			if !r.startPeers[u] {
				return fmt.Errorf("%w: member %x (%s, peer URL %s) is listed since a member runs etcd %s, and was not when this run began: a member back from the v2 store (etcd-io/etcd#20967)? Nothing else restarts and the partition is locked: check `etcdctl member list` on every member, remove a member nobody runs (etcdctl member remove), then run again",
					ErrMembershipChanged, m.ID, cmp.Or(m.Name, "no name"), u, mv.To.MajorMinor())
			}
		}
	}
	return nil
}

// anyRunsMinor says a member runs to's minor by its own word.
func anyRunsMinor(st ClusterState, to EtcdVersion) bool {
	for _, m := range st.Members {
		if v, ok := planner.ParseVersion(m.ServerVersion); ok && v.MajorMinor() == to.MajorMinor() {
			return true
		}
	}
	return false
}
