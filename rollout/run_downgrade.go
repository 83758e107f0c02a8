package rollout

import (
	"context"
	"errors"
	"fmt"

	corev1 "k8s.io/api/core/v1"

	"github.com/etcd-rollout/pulumi-etcd-rollout/rollout/internal/member"
	"github.com/etcd-rollout/pulumi-etcd-rollout/rollout/internal/snapshot"
)

// enableDowngrade validates and enables etcd's downgrade to the step's minor, unless a member already reports
// it enabled (an earlier run), then waits for etcd to lower the cluster version and every member's storage
// version to it.
func (r *run) enableDowngrade(ctx context.Context, st ClusterState, step Step) error {
	e, target := r.e, step.Version
	if !downgradeEnabledFor(st, target) {
		if err := e.ValidateDowngrade(ctx, st, target); err != nil {
			return err
		}
		pod, _ := downgradeMember(st)
		e.emit(step, "enabling etcd's downgrade to %s through %s (validate ok)", target, pod)
		r.downgrade = &downgradeRun{target: target} // set first: a lost answer may still have enabled it
		if pod, err := e.downgradeCall(ctx, st, member.DowngradeEnable, target); err != nil && !e.reportsDowngradeEnabled(ctx, st, target) {
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
	if err := e.lease.confirm(ctx); err != nil {
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
	dest, err := snapshot.Parse(plan.Snapshot.To)
	if err == nil {
		var rec SnapshotRecord
		if rec, err = e.snapshotOf(ctx, st, dest, ""); err == nil {
			r.res.Snapshot = &rec
			e.announce(Event{Kind: EventSnapshotStored, Snapshot: &rec}, "snapshot: %s verified (%d bytes, revision %d, sha256 %s) before %s restarts",
				rec.Location, rec.Size, rec.Revision, rec.SHA256, st.Members[plan.Snapshot.Before].Pod)
			return nil
		}
	}
	if ctx.Err() != nil || !e.cfg.ProceedWithoutSnapshot {
		return fmt.Errorf("%w: %w: this roll changes etcd's minor version, after which only a snapshot rolls back, and nothing was restarted: %w; fix the destination (snapshotTo: %s) and run again, or set proceedWithoutSnapshot to go on without one",
			ErrBlocked, ErrNoSnapshot, err, plan.Snapshot.To)
	}
	r.res.SnapshotSkipped = err.Error()
	e.announce(Event{Kind: EventSnapshotSkipped}, "snapshot: going on WITHOUT one, as proceedWithoutSnapshot allows: %v", err)
	return nil
}
