package rollout

import (
	"context"
	"fmt"
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
	if p.witness.uid == "" {
		return "", false
	}
	live, err := r.e.kube.CoreV1().Pods(r.e.cfg.Namespace).Get(ctx, pod, metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
		return "its pod was deleted", true
	case err != nil:
		return "", false
	case string(live.UID) != p.witness.uid:
		return fmt.Sprintf("it runs on pod %s now, at revision %s", live.UID, live.Labels[appsv1.ControllerRevisionHashLabelKey]), true
	}
	return "", false
}

// forgetReplaced forgets the member at ordinal when its pod was replaced since it passed; forgot says it
// did, and the caller must look again before it decides anything on that member.
func (r *run) forgetReplaced(ctx context.Context, ordinal int, p *passedMember) (forgot bool) {
	pod := podName(r.e.cfg.StatefulSet, ordinal)
	now, replaced := r.replacedSincePassing(ctx, pod, p)
	if !replaced {
		return false
	}
	delete(r.passed, ordinal)
	delete(r.downAfterPass, pod)
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
		return false, fmt.Errorf("stopped while asking whether someone else replaced %s's pod since it passed: %w", podName(r.e.cfg.StatefulSet, ordinal), err)
	}
	return false, nil
}

// withoutReplaced forgets every member of st that passed and that st shows on another pod than the one
// that passed, once the API server confirms it.
func (r *run) withoutReplaced(ctx context.Context, st ClusterState) {
	for _, m := range st.Members {
		if p, ok := r.passed[m.Ordinal]; ok && !m.Unseen && (!m.PodExists || m.PodUID != p.witness.uid) {
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
		r.e.emit(Step{Kind: StepWaitMember, Ordinal: ordinal}, "%s's data died with its pod, but etcd's member list could not be read to record it: the next look may take it for done", podName(r.e.cfg.StatefulSet, ordinal))
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
	rec := replace.Record{PeerURL: info.PeerURLs[0], LearnerID: info.ID, LearnerPodUID: p.witness.uid}
	if err := r.e.records.Save(ctx, ordinal, rec); err != nil {
		r.e.emit(Step{Kind: StepWaitMember, Ordinal: ordinal}, "%s's data died with its pod, but that could not be recorded (%v): the next look may take it for done", m.Pod, err)
	}
}
