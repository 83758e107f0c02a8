package rollout

// A run's points of no return: etcd's downgrade enabled, the snapshot stored before a step only it can undo,
// and the restart of a one-member etcd's only member, measured.

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/etcd-rollout/pulumi-etcd-rollout/rollout/internal/member"
	"github.com/etcd-rollout/pulumi-etcd-rollout/rollout/internal/outage"
	"github.com/etcd-rollout/pulumi-etcd-rollout/rollout/internal/planner"
	"github.com/etcd-rollout/pulumi-etcd-rollout/rollout/internal/snapshot"
)

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
