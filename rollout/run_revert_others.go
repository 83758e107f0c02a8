package rollout

import (
	"context"
	"fmt"
	"maps"
	"slices"

	"github.com/etcd-rollout/pulumi-etcd-rollout/rollout/internal/planner"
)

// othersOnTheFailedRevisionStayUp watches, before a revert deletes the failed member's pod, every other member on
// the failed revision that this run has not seen pass (a run before this one rolled it: needsProof) until it has
// stayed healthy in one etcd process for the stability window. Such a member was disrupted by our writes and is
// not known to be back: one healthy look catches a fast crash loop in one of its up moments as readily as a
// member that is well, and deleting a second pod while it flaps disrupts two members at once (the schedule
// checker's seed 13073 of 100,000: a resumed run reverted etcd-4 while etcd-3, rolled by the run it resumed and
// crash-looping, answered the revert's look). Members this run saw pass are judged by provenInTheSameProcess;
// ones that do not answer us are left to the quorum rule, as every delete leaves them.
//
// It returns the process each watched member stayed up in, which the look right before the delete checks
// again (run.watchedStillUp).
//
// A replacement letting a removed member's pod go onto the update revision watches the same members first
// (before says what is about to happen): the schedule checker's seed 334 of 10,000, a resumed replacement
// lowered the partition for etcd-3 while etcd-4, replaced by the run before onto a crash-looping revision,
// answered its look between two crashes.
func (r *run) othersOnTheFailedRevisionStayUp(ctx context.Context, st ClusterState, ordinal int, step Step, before string) (stayedUp, error) {
	up := stayedUp{}
	for _, o := range st.Members {
		if o.Ordinal == ordinal || !o.PodExists || o.Unseen || !planner.NeedsProof(st, o) {
			continue
		}
		if err := r.didNotStayUp(ctx, o); err != nil {
			return nil, err
		}
		r.e.emit(step, "before %s: %s is on revision %s too and no look of this run proved it: checking it stays healthy for %s", before, o.Pod, st.UpdateRevision, r.e.stableFor)
		process, seen, err := r.e.staysUp(ctx, st, o.Ordinal)
		if err != nil {
			r.notUp(o.Pod, o.Ordinal, seen)
			return nil, fmt.Errorf("%w: %s, also on revision %s, did not stay healthy for %s within %s (%s); not deleting a second member's pod: the partition is locked, bring the cluster back by hand (apply the previous template, then run again)",
				ErrBlocked, o.Pod, st.UpdateRevision, r.e.stableFor, r.e.cfg.HealthTimeout, seen)
		}
		up[o.Ordinal] = process
	}
	return up, nil
}

// didNotStayUp refuses when member o passed in this run and did not stay up since: a look after its pass found
// it down (downAfterPass), or it answers from another etcd process than the one that passed. A watch from its
// new process onwards would take a slow crash loop's up phase for health (the schedule checker's seeds 12841
// and 25572 of 100,000: etcd-4 passed, restarted or was seen down, crash-looped slower than the window, and
// passed the revert's watch while etcd-3 was deleted).
func (r *run) didNotStayUp(ctx context.Context, o MemberState) error {
	p, passed := r.passed[o.Ordinal]
	if !passed {
		p, passed = r.unproven[o.Ordinal]
	}
	if !passed {
		return nil
	}
	seen := ""
	if r.downAfterPass[o.Pod] {
		seen = "a look after it passed found it down"
	} else if inc, err := r.e.processOf(ctx, o.Pod); err == nil && p.incarnation.Known() && !inc.Same(p.incarnation) {
		seen = fmt.Sprintf("it answers from etcd process %s, not the one that passed, %s", inc, p.incarnation)
	}
	if seen == "" {
		return nil
	}
	r.notUp(o.Pod, o.Ordinal, seen)
	return fmt.Errorf("%w: %s, also on revision %s, did not stay up since it passed (%s); not deleting a second member's pod: the partition is locked, bring the cluster back by hand (apply the previous template, then run again)",
		ErrBlocked, o.Pod, o.Revision, seen)
}

// notUp records that a look of this run found member ordinal not staying up: the run's report does not count
// it rolled, even where it passed its gates earlier on one healthy look (the schedule checker's seed 17819 of
// 100,000: etcd-3, passed on one look and then crash-looping, answered the exit's look and was reported rolled).
func (r *run) notUp(pod string, ordinal int, seen string) {
	r.downAfterPass[pod] = true
	if slices.Contains(r.res.MembersRolled, pod) {
		r.takeBack(ordinal, "%s is no longer counted rolled: it did not stay up (%s)", pod, seen)
	}
}

// stayedUp is the etcd process each member othersOnTheFailedRevisionStayUp watched stayed up in, by ordinal.
type stayedUp map[int]Incarnation

// watchedStillUp is rule for a look right before the delete, with every watched member still answering from the process
// that stayed up: one that restarted since, or cannot say, refuses the delete. Members are asked lowest ordinal
// first, so that a schedule replays alike.
func (r *run) watchedStillUp(ctx context.Context, up stayedUp, rule func(ClusterState, int) error) func(ClusterState, int) error {
	return func(now ClusterState, ordinal int) error {
		if err := rule(now, ordinal); err != nil {
			return err
		}
		for _, i := range slices.Sorted(maps.Keys(up)) {
			process := up[i]
			if !process.Known() {
				continue
			}
			inc, err := r.e.processOf(ctx, now.Members[i].Pod)
			if err != nil || !inc.Same(process) {
				why := fmt.Sprintf("now etcd process %s", inc.Name())
				if err != nil {
					why = err.Error()
				}
				return fmt.Errorf("%w: %s, also on revision %s, stayed up in etcd process %s but not since (%s); not deleting a second member's pod: the partition is locked, bring the cluster back by hand (apply the previous template, then run again)",
					ErrBlocked, now.Members[i].Pod, now.UpdateRevision, process, why)
			}
		}
		return nil
	}
}
