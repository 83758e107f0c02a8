package rollout

// The members a run saw pass: forgotten when someone else replaced their pod since, and watched to stay up
// before the run deletes another pod.

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/etcd-rollout/pulumi-etcd-rollout/rollout/internal/planner"
	"github.com/etcd-rollout/pulumi-etcd-rollout/rollout/internal/replace"
)

// A member that passed its gates whose pod someone else deleted since (kubectl, a node drain, or the
// StatefulSet controller acting on a stale view after an API server restart, which CI saw) runs a new etcd
// process on a pod this run never restarted: with the partition locked, the controller brings it back on
// the old revision. That says nothing against the new revision, so it is neither a failure nor a revert:
// the run forgets that the member passed (its new process is unproven, and it is no longer reported
// rolled), looks again, and rolls or proves it again before it disrupts anything else.

// replacedSincePassing asks the API server, not the watch, whether the pod that passed is gone: a stale
// cache shows an older pod too (withoutStaleViews), and that must not make the run forget a member. It
// says no when the API server cannot be asked.
func (r *run) replacedSincePassing(ctx context.Context, pod string, p *passedMember) (now string, replaced bool) {
	if p.witness.UID == "" {
		return "", false
	}
	live, err := r.e.kube.CoreV1().Pods(r.e.cfg.Namespace).Get(ctx, pod, metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
		return "its pod was deleted", true
	case err != nil:
		return "", false
	case string(live.UID) != p.witness.UID:
		return fmt.Sprintf("it runs on pod %s now, at revision %s", live.UID, live.Labels[appsv1.ControllerRevisionHashLabelKey]), true
	}
	return "", false
}

// forgetReplaced forgets the member at ordinal when its pod was replaced since it passed; forgot says it
// did, and the caller must look again before it decides anything on that member.
func (r *run) forgetReplaced(ctx context.Context, ordinal int, p *passedMember) (forgot bool) {
	pod := planner.PodName(r.e.cfg.StatefulSet, ordinal)
	now, replaced := r.replacedSincePassing(ctx, pod, p)
	if !replaced {
		return false
	}
	delete(r.passed, ordinal)
	delete(r.downAfterPass, pod)
	delete(r.seenDownSincePass, pod)
	r.recordDataLost(ctx, ordinal, p)
	r.takeBack(ordinal,
		"%s passed its gates %s ago, but someone else replaced its pod since (%s): not this run's doing and no failure of the revision; it is no longer counted rolled, and the run looks again before it rolls or proves it again",
		pod, time.Since(p.at).Round(100*time.Millisecond), now)
	return true
}

// replacedOrEnded is asked before a member that passed is failed for not staying up: forgot says someone else
// replaced its pod since (forgetReplaced), and err that the run's context ended before the API server could
// say. Either way the member is not failed: an answer that never came could have cleared it, and a failure
// blamed on the revision would send the user to a template that did nothing wrong.
func (r *run) replacedOrEnded(ctx context.Context, ordinal int, p *passedMember) (forgot bool, err error) {
	if r.forgetReplaced(ctx, ordinal, p) {
		return true, nil
	}
	if err := ctx.Err(); err != nil {
		return false, fmt.Errorf("stopped while asking whether someone else replaced %s's pod since it passed: %w", planner.PodName(r.e.cfg.StatefulSet, ordinal), err)
	}
	return false, nil
}

// withoutReplaced forgets every member of st that passed and that st shows on another pod than the one
// that passed, once the API server confirms it.
func (r *run) withoutReplaced(ctx context.Context, st ClusterState) {
	for _, m := range st.Members {
		if p, ok := r.passed[m.Ordinal]; ok && !m.Unseen && (!m.PodExists || m.PodUID != p.witness.UID) {
			r.forgetReplaced(ctx, m.Ordinal, p)
		}
	}
}

// recordDataLost notes, for a member whose data dies with its pod, that the pod which held its data since it
// passed is gone: the pod that replaced it came back with an empty data dir, and etcd lets it vote under the
// member's ID. The replacement record it writes (the member's ID and the pod that held its data, as after a
// promote) makes the next plan replace the member again (replace.ReplaceAgain) rather than take it for done
// (the schedule checker's seed 637 of 10,000, once it judged a run's end by the members voting with an empty
// log). A record of another replacement in flight says more, and stays. Best effort: a record that cannot be written is said.
func (r *run) recordDataLost(ctx context.Context, ordinal int, p *passedMember) {
	if ordinal >= len(r.last.Members) || !planner.Replaced(r.last, ordinal) {
		return
	}
	st, err := r.e.Observe(ctx) // the member list as it is now: the run's last look may predate the member's ID
	if err != nil || !st.MembershipKnown {
		r.e.emit(Step{Kind: StepWaitMember, Ordinal: ordinal}, "%s's data died with its pod, but etcd's member list could not be read to record it: the next look may take it for done", planner.PodName(r.e.cfg.StatefulSet, ordinal))
		return
	}
	m := st.Members[ordinal]
	if id := r.memberIDs[ordinal]; id != 0 {
		m.MemberID = id
	}
	info, ok := planner.ListedAs(st, m)
	if !ok || len(info.PeerURLs) != 1 || m.MemberID == 0 || info.ID != m.MemberID {
		return
	}
	if rec, ok := st.Replacing[ordinal]; ok && rec.LearnerID != info.ID {
		return // a replacement of another member ID is in flight: its record says more
	}
	rec := replace.Record{PeerURL: info.PeerURLs[0], LearnerID: info.ID, LearnerPodUID: p.witness.UID}
	if err := r.e.records.Save(ctx, ordinal, rec); err != nil {
		r.e.emit(Step{Kind: StepWaitMember, Ordinal: ordinal}, "%s's data died with its pod, but that could not be recorded (%v): the next look may take it for done", m.Pod, err)
	}
}

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
