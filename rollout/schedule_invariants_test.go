package rollout

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"
	"time"

	k8stesting "k8s.io/client-go/testing"

	"github.com/etcd-rollout/pulumi-etcd-rollout/rollout/internal/gate"
	"github.com/etcd-rollout/pulumi-etcd-rollout/rollout/internal/planner"
)

// The checks below judge the engine by the fakes' truth: which member's etcd really is up, which revision
// really crash-loops, who really holds the Lease, what the partition and the pods really are. They never ask
// the engine's own formulas. They are fair: a fault counts against an engine only once that engine could
// have known it, from its own requests (answerable), so a member that crashes between the engine's last look
// and its write is no violation, while one that refused the engine's call a moment before is.

// worldSnapshot is the state a request is judged by: right before it and right after it.
type worldSnapshot struct {
	partition, replicas   int
	updateRev, currentRev string
	revs                  []string
	holder, leader        string
	restarted, deleted    int
	elections             int
	// adopted counts pods that came back with an empty data dir under the member ID that voted before.
	adopted int
}

// snapshot reads the state; w.mu is held.
func (w *world) snapshot() worldSnapshot {
	sts := w.stsNow()
	s := worldSnapshot{replicas: 1, partition: -1, updateRev: sts.Status.UpdateRevision, currentRev: sts.Status.CurrentRevision,
		revs: w.revisionsNow(), holder: w.holderNow(),
		leader: w.f.leaderPod(), elections: w.electionsNow(), adopted: len(w.f.adoptedPods())}
	if sts.Spec.Replicas != nil {
		s.replicas = int(*sts.Spec.Replicas)
	}
	if ru := sts.Spec.UpdateStrategy.RollingUpdate; ru != nil && ru.Partition != nil {
		s.partition = int(*ru.Partition)
	}
	w.c.mu.Lock()
	s.restarted, s.deleted = len(w.c.restarted), len(w.c.deleted)
	w.c.mu.Unlock()
	return s
}

// judgeRequest judges one Kubernetes request of se that the fake cluster answered with err; w.mu is held.
func (w *world) judgeRequest(se *schedEngine, a k8stesting.Action, pre worldSnapshot, err error) {
	post := w.snapshot()
	if err == nil {
		switch verb, res := a.GetVerb(), a.GetResource().Resource; {
		case verb == "patch" && res == "statefulsets" && post.partition != pre.partition:
			w.judgePartition(se, pre, post)
		case verb == "delete" && res == "pods" && post.deleted > pre.deleted:
			if del, ok := a.(k8stesting.DeleteAction); ok {
				w.judgeDelete(se, pre, post, del.GetName())
			}
		}
	}
	// (g): a member whose data died with its pod is replaced, never restarted under its old identity. A pod
	// someone else replaced after se's last look at it is not judged, as for (a): se could not know.
	for _, pod := range w.f.adoptedPods()[pre.adopted:] {
		if w.replacedUnknownTo(se, pod) {
			w.logf(se.name, "%s %s restarts %s under its old ID, whose pod someone else replaced after the run's last look at it: not judged", a.GetVerb(), a.GetResource().Resource, pod)
			continue
		}
		w.violate("g", se, "%s %s: %s came back with an empty data dir under the member ID that voted before", a.GetVerb(), a.GetResource().Resource, pod)
	}
	w.noteDisrupted(pre)
}

// judgePartition judges a partition write: a lowering is a disruption of the members it exposes; a re-lock
// is always safe for the cluster, but not when it undoes the lowering of a run that holds the lease.
func (w *world) judgePartition(se *schedEngine, pre, post worldSnapshot) {
	switch {
	case post.partition < pre.partition:
		var targets []int
		for i := post.partition; i < pre.replicas && i < len(pre.revs); i++ {
			if i < 0 || pre.revs[i] == pre.updateRev {
				continue
			}
			if pod := planner.PodName("etcd", i); i != post.partition && w.replacedUnknownTo(se, pod) {
				w.logf(se.name, "the lowering exposes %s too, whose pod someone else replaced after the run's last look at it: not judged", pod)
				continue
			}
			targets = append(targets, i)
		}
		what := fmt.Sprintf("lowered the partition %d → %d", pre.partition, post.partition)
		if len(targets) > 0 {
			w.checkPermit(se, what, post.partition, time.Now(), gate.Restart, gate.ReleaseData)
		}
		w.disruption(se, pre, post, what, targets)
		w.lowerer = se.name
	case post.partition >= post.replicas:
		if pre.holder != "" && pre.holder != se.name && w.lowerer != "" && w.lowerer != se.name {
			w.violate("d", se, "re-locked the partition that %s lowered (to %d) while %s holds the lease", w.lowerer, pre.partition, pre.holder)
		}
		w.lowerer, w.killedLowered = "", ""
	default:
		w.lowerer = se.name
	}
}

// replacedUnknownTo says someone else replaced pod after se's last health look at it: se could not know the
// member is back on another revision, or down; w.mu is held.
func (w *world) replacedUnknownTo(se *schedEngine, pod string) bool {
	at := w.replacedAt[pod]
	return !at.IsZero() && at.After(se.lastStatus[pod].at)
}

// judgeDelete judges a pod delete: a disruption of that member.
func (w *world) judgeDelete(se *schedEngine, pre, post worldSnapshot, pod string) {
	ordinal, ok := planner.OrdinalOf("etcd", pod)
	if !ok {
		return
	}
	w.checkPermit(se, "deleted pod "+pod, ordinal, time.Now(), gate.DeletePod)
	w.disruption(se, pre, post, "deleted pod "+pod, []int{ordinal})
}

// judgeMembership judges a membership change of se's: removing target's member is a disruption of it (one at a
// time, the others keep quorum); adding or promoting a learner (target "") disrupts nobody but needs the lease.
func (w *world) judgeMembership(se *schedEngine, pre worldSnapshot, what, target string, sent time.Time) {
	post := pre
	post.elections = w.electionsNow()
	var targets []int
	if ordinal, ok := planner.OrdinalOf("etcd", target); ok {
		targets = []int{ordinal}
		w.disrupted[target] = true
		w.checkPermit(se, what, ordinal, sent, gate.RemoveMember)
	} else {
		w.checkPermit(se, what, -1, sent, gate.ChangeMembership)
	}
	w.disruption(se, pre, post, what, targets)
}

// memberOfID is the pod whose listed member has id; w.mu is held.
func (w *world) memberOfID(id uint64) (string, bool) {
	w.f.mu.Lock()
	defer w.f.mu.Unlock()
	return w.f.memberWithID(id)
}

// judgeMoveLeader judges a leader transfer that moved the leader: a disruption of no member, but one only
// the lease holder may make.
func (w *world) judgeMoveLeader(se *schedEngine, pre worldSnapshot, to string, sent time.Time) {
	post := pre
	post.elections = w.electionsNow()
	what := fmt.Sprintf("moved the leader %s → %s", pre.leader, to)
	if from, ok := planner.OrdinalOf("etcd", pre.leader); ok {
		w.checkPermit(se, what, from, sent, gate.MoveLeader)
	}
	w.disruption(se, pre, post, what, nil)
}

// checkPermit is (p): the gate is the one way to a disruption. Every one the fakes see was preceded, in the
// same run, by a gate permit of one of kinds for that member (any member for ordinal -1) whose lease had not
// run out when the write was sent: sent is when it landed, or, for an etcd call that can land late, the
// deadline it was sent with, if earlier (it went out before it; when it lands is the network's doing).
func (w *world) checkPermit(se *schedEngine, what string, ordinal int, sent time.Time, kinds ...gate.Kind) {
	p, ok := se.permitFor(ordinal, kinds...)
	switch {
	case !ok:
		w.violate("p", se, "%s without a gate permit (%v) for it", what, kinds)
	case sent.After(p.LeaseUntil):
		w.violate("p", se, "%s, sent %s after the lease of its permit (%s) ran out", what, sent.Sub(p.LeaseUntil).Round(time.Millisecond), p)
	}
}

// sentBy is when a call made with ctx went out at the latest: now, or ctx's deadline when that is earlier (a
// late call lands after it).
func sentBy(ctx context.Context) time.Time {
	now := time.Now()
	if d, ok := ctx.Deadline(); ok && d.Before(now) {
		return d
	}
	return now
}

// disruption checks one disruption by se of the members targets (ordinals), judged on the state before it:
// (d) the lease is se's, (c) a partition a SIGKILLed run left lowered was locked first, (a) one member at a
// time, (b) the others keep quorum.
func (w *world) disruption(se *schedEngine, pre, post worldSnapshot, what string, targets []int) {
	w.lastDisruption[se.name] = w.now()
	if !se.disrupted {
		se.disrupted, se.elFirstDisruption = true, pre.elections
	}
	se.elLastDisruption = post.elections
	if pre.holder != se.name {
		w.violate("d", se, "%s while the lease is held by %s", what, holderName(pre.holder))
	}
	if w.killedLowered != "" && w.killedLowered != se.name {
		w.violate("c", se, "%s before locking the partition that the SIGKILLed %s left lowered", what, w.killedLowered)
	}
	w.judgeSnapshotFirst(se, what)
	if w.s.OmitsInitialState && len(targets) > 0 {
		// (r): a shape every run must refuse before it touches anything (a replacement onto a template whose etcd
		// starts as "new" removes a voter that never comes back).
		w.violate("r", se, "%s, though the template starts etcd without --initial-cluster-state: no replaced member can join", what)
	}
	if len(targets) == 0 {
		return
	}
	if len(targets) > 1 {
		w.violate("a", se, "%s exposes %v, all off updateRevision %s, to restarts at once", what, podNames(targets), pre.updateRev)
	}
	isTarget := map[int]bool{}
	for _, t := range targets {
		isTarget[t] = true
	}
	se.restarts++
	w.checkOneAtATime(se, what, isTarget)
	w.checkQuorum(se, what, isTarget)
}

// checkOneAtATime is (a): no member is disrupted while another that our writes disrupted is not back healthy.
func (w *world) checkOneAtATime(se *schedEngine, what string, isTarget map[int]bool) {
	for _, pod := range sortedKeys(w.disrupted) {
		ordinal, _ := planner.OrdinalOf("etcd", pod)
		if isTarget[ordinal] || w.healthy(pod) {
			continue
		}
		if ok, why := w.answerable(se, pod); ok {
			w.violate("a", se, "%s while %s, which our writes disrupted, is not back healthy: %s", what, pod, why)
		}
	}
}

// checkQuorum is (b): the members left out keep a quorum by the fakes' truth. A member that is not up but
// whose fault se could not have known counts as up: the engine is not blamed for what it could not see.
func (w *world) checkQuorum(se *schedEngine, what string, isTarget map[int]bool) {
	if w.s.OneMember && w.s.AcceptOutage {
		return // the consent to the write outage (invariant s wants a verified snapshot first)
	}
	up, blamed, voters := 0, []string{}, 0
	for i := 0; i < w.s.Members; i++ {
		pod := planner.PodName("etcd", i)
		if !w.votes(pod) {
			continue // a removed member or a learner has no vote: the quorum is judged over the voters that exist
		}
		voters++
		if isTarget[i] {
			continue
		}
		if w.healthy(pod) {
			up++
			continue
		}
		ok, why := w.answerable(se, pod)
		if !ok {
			up++ // not known to se: given the benefit of the doubt
			continue
		}
		blamed = append(blamed, why)
	}
	if majority := voters/2 + 1; up < majority {
		down := "the others are the members it disrupts"
		if len(blamed) > 0 {
			down = strings.Join(blamed, "; ")
		}
		w.violate("b", se, "%s while only %d other voter(s) are up, %d of %d needed: %s", what, up, majority, voters, down)
	}
}

// votes says pod's member is a voter now (listed, not removed, not a learner); w.mu is held.
func (w *world) votes(pod string) bool {
	w.f.mu.Lock()
	defer w.f.mu.Unlock()
	_, listed := w.f.ids[pod]
	return listed && !w.f.membership.removed[pod] && !w.f.learner[pod]
}

// healthy says whether pod's etcd is truly up and not crash-looping; w.mu is held.
func (w *world) healthy(pod string) bool {
	w.f.mu.Lock()
	defer w.f.mu.Unlock()
	_, looping := w.f.crashStart[pod]
	return !w.f.down[pod] && !looping && !w.f.learner[pod] && !w.f.membership.removed[pod]
}

// answerable says whether se could have known that pod, which is not healthy, is so, and how. Each rule is
// one a correct engine keeps by the project's own rules, so that a fault it could not have seen is never
// held against it:
//   - a member down by itself (a crash) that se's last health look (Status) at it found down: se knows it is
//     down (a crash after that look, even one a member list or a read ran into, is not held against it);
//   - a member crash-looping, since its start, on the update revision, faster than the stability window,
//     that se has looked at since and not seen pass: a run watches every member on the update revision it
//     has not seen pass for the whole window before it disrupts anything else, and the window shows such a
//     loop;
//   - a member se reported healthy (it passed its gates) after its crash loop began, and that se then found
//     down or serving from another process: a member that passed and did not stay up is a failure;
//   - a member that restarted at the very moment se said it passed, and flaps since: a run checks the process
//     of a member that passed before its next disruption (the cool-down's end, or item 10 of issue 21 with
//     no cool-down), and that check shows the restart.
//
// Any other crash loop (slower than the window, or on a revision the run does not roll to) can pass every
// look a correct engine takes, and is not held against it.
func (w *world) answerable(se *schedEngine, pod string) (bool, string) {
	w.f.mu.Lock()
	down := w.f.down[pod]
	_, looping := w.f.crashStart[pod]
	w.f.mu.Unlock()
	if down {
		since, crashed := w.crashed[pod]
		if !crashed {
			return true, pod + " is down"
		}
		if look, ok := se.lastStatus[pod]; ok && look.down && !look.at.Before(since) {
			return true, fmt.Sprintf("%s crashed at %s, and %s's last health look at it, at %s, found it down", pod, w.since(since), se.name, w.since(look.at))
		}
		return false, ""
	}
	if !looping {
		return false, ""
	}
	l := w.loops[pod]
	if l.passedBy == se.name {
		return true, fmt.Sprintf("%s restarted right after %s said it passed (at %s) and crash-loops since: a check of its process before the next disruption shows it",
			pod, se.name, w.since(l.since))
	}
	ordinal, _ := planner.OrdinalOf("etcd", pod)
	onUpdateRev := w.revisionsNow()[ordinal] == w.stsNow().Status.UpdateRevision
	passed, passedSince := se.passedAt[pod]
	passedSince = passedSince && !passed.Before(l.since)
	// A member se saw pass since has had its window, or a single look on a revision it had proven before the
	// revision went bad: what is left is the rules below.
	if look, ok := se.lastCall[pod]; ok && l.onRestart && !w.s.SlowLoop && onUpdateRev && !passedSince && look.After(l.since) {
		return true, fmt.Sprintf("%s crash-loops on the update revision since it started at %s, down within the stability window, and %s looked at it at %s",
			pod, w.since(l.since), se.name, w.since(look))
	}
	if !passedSince {
		return false, ""
	}
	if saw, ok := se.sawDown[pod]; ok && saw.After(passed) {
		return true, fmt.Sprintf("%s crash-loops since %s; %s saw it pass at %s and found it down at %s", pod, w.since(l.since), se.name, w.since(passed), w.since(saw))
	}
	if a, b, ok := twoProcesses(se.incarnations[pod], passed); ok {
		return true, fmt.Sprintf("%s crash-loops since %s; %s saw it pass at %s, then read two of its processes: %s at %s, %s at %s",
			pod, w.since(l.since), se.name, w.since(passed), a.value, w.since(a.at), b.value, w.since(b.at))
	}
	return false, ""
}

// twoProcesses finds two different process names read after since.
func twoProcesses(reads []incarnationRead, since moment) (incarnationRead, incarnationRead, bool) {
	var first *incarnationRead
	for i := range reads {
		r := reads[i]
		if r.at.Before(since) {
			continue
		}
		if first == nil {
			first = &reads[i]
		} else if !r.value.Same(first.value) { // the fake starts processes 10 s apart, far from bootTimeJitter
			return *first, r, true
		}
	}
	return incarnationRead{}, incarnationRead{}, false
}

// noteDisrupted adds the members restarted or deleted during a request of ours to those our writes disrupted,
// and forgets every one of them that is healthy again; w.mu is held.
func (w *world) noteDisrupted(pre worldSnapshot) {
	w.c.mu.Lock()
	hit := append(append([]string(nil), w.c.restarted[pre.restarted:]...), w.c.deleted[pre.deleted:]...)
	w.c.mu.Unlock()
	for _, pod := range hit {
		w.disrupted[pod] = true
	}
	for pod := range w.disrupted {
		if w.healthy(pod) {
			delete(w.disrupted, pod)
		}
	}
}

// checkExit judges a run's return: (c) it did not leave its own lowering, (e) what it reports was measured.
// A SIGKILLed run is not judged: it has no exit.
func (w *world) checkExit(se *schedEngine, res Result, err error) {
	w.checkBlame(se, err)
	post := w.snapshot()
	switch {
	case post.partition < post.replicas && w.lowerer == se.name && post.holder != "" && post.holder != se.name:
		// It lost its lease while it had the partition lowered: a lock of its own now could undo the new
		// holder's lowering, so the partition is the holder's to lock, before anything else, like one a
		// SIGKILLed run left (the checker's own bug, seeds 85042 and 85890 of 100,000: it held this against a
		// run that left the lock to the run that took its lease over).
		w.killedLowered = se.name
		w.logf(se.name, "its lowering is left to %s, which holds the lease now", post.holder)
	case post.partition < post.replicas && w.lowerer == se.name:
		w.violate("c", se, "returned with the partition at %d, lowered by its own write (%d replicas)", post.partition, post.replicas)
	}
	if err == nil {
		w.checkNoEmptyVoter(se)
	}
	if w.s.DigestImages && errors.Is(err, ErrVersionUnknown) {
		// (v): an image pinned by tag and digest has the tag's version (review 3, item 5).
		w.violate("v", se, "refused an image pinned by tag@digest as one whose version cannot be told: %v", err)
	}
	if other := w.disruptedMeanwhile(se); other != "" {
		w.logf(se.name, "its report is not judged: %s disrupted members during its run", other)
		return
	}
	w.checkReportedElections(se, res, post)
	w.checkReportedMembers(se, res, post)
}

// checkNoEmptyVoter is (g) at a run's successful return: no member votes with an empty log under an ID that
// voted before (a replaced member whose pod someone else recreated after its promote must be replaced again,
// review 3's item 1). A pod replaced after se's last look at it is not held against se; w.mu is held.
func (w *world) checkNoEmptyVoter(se *schedEngine) {
	w.f.mu.Lock()
	pods := w.f.emptyVoters()
	w.f.mu.Unlock()
	for _, pod := range pods {
		if w.replacedUnknownTo(se, pod) {
			continue
		}
		w.violate("g", se, "returned done while %s votes with an empty log under the member ID that voted before", pod)
	}
}

// checkBlame is (f): a run that fails a member as its own failure (a gate it did not pass or did not stay
// up after, which onFailure: revert reverts) must have had a cause in the fakes' truth; w.mu is held.
func (w *world) checkBlame(se *schedEngine, err error) {
	var gate *GateTimeoutError
	var reverted *RevertedError
	pod := ""
	switch {
	case errors.As(err, &reverted):
		pod = reverted.Pod
	case errors.As(err, &gate):
		pod = gate.Pod
	}
	if pod == "" || w.touched[pod] || w.touchedAll {
		return
	}
	replaced, passed := w.replacedAt[pod], se.passedAt[pod]
	switch {
	case replaced.IsZero():
		w.violate("f", se, "failed %s as its own failure, though nothing happened to it or its revision: %v", pod, err)
	case !passed.IsZero() && replaced.After(passed):
		w.violate("f", se, "failed %s as its own failure, though someone else replaced its pod after it passed: %v", pod, err)
	}
}

// disruptedMeanwhile names another engine that disrupted something since se started: what se reports may then
// describe that engine's doing as well as its own; w.mu is held.
func (w *world) disruptedMeanwhile(se *schedEngine) string {
	for _, name := range sortedKeys(setOf(mapKeys(w.lastDisruption))) {
		if name != se.name && w.lastDisruption[name].After(se.startedAt) {
			return name
		}
	}
	return ""
}

func mapKeys(m map[string]moment) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	return out
}

// checkReportedElections is (e) for the elections: a run that reports a count (it read the term after) must
// report what the fake counted. The run's own measurement window lies within its life and contains its
// disruptions, so the count must be between the elections between its first and last disruption and those
// of its whole life.
func (w *world) checkReportedElections(se *schedEngine, res Result, post worldSnapshot) {
	if res.ElectionsUnknown {
		return // it says the count is unknown (no term read after, or a move it cannot tell from an election)
	}
	outer := post.elections - se.elStart
	inner := 0
	if se.disrupted {
		inner = se.elLastDisruption - se.elFirstDisruption
	}
	if o := res.WriteOutage; o != nil && o.Elections >= 0 {
		// The fake counts every election; the run, the only member's own restarts apart, each the
		// consented outage's: at most one per restart it caused.
		if o.Elections > se.restarts {
			w.violate("e", se, "reported %d election(s) of the only member's own restarts, but caused %d restart(s)", o.Elections, se.restarts)
		}
		outer, inner = outer-o.Elections, inner-o.Elections
	}
	if res.UnplannedElections > outer || res.UnplannedElections < inner {
		w.violate("e", se, "reported %d unplanned election(s) (raft term %d → %d, %d transfers); the fake counted %d during the run, %d of them between its first and last disruption",
			res.UnplannedElections, res.TermBefore, res.TermAfter, res.LeaderTransfers, outer, inner)
	}
}

// checkReportedMembers is (e) for the members: each one reported rolled is at the run's update revision (or
// at the StatefulSet's newer one) and up, unless its fault is one the run could not have known or one of
// its own (a crash by itself). A run whose lease someone else holds now is not judged on it: its successor
// may have changed what it left.
func (w *world) checkReportedMembers(se *schedEngine, res Result, post worldSnapshot) {
	if post.holder != "" && post.holder != se.name {
		return
	}
	seen := map[string]bool{}
	for _, pod := range res.MembersRolled {
		if seen[pod] {
			w.violate("e", se, "reported %s rolled more than once: %v", pod, res.MembersRolled)
		}
		seen[pod] = true
		if w.replacedUnknownTo(se, pod) {
			w.logf(se.name, "its report of %s is not judged: someone else replaced its pod after the run's last look at it", pod)
			continue
		}
		ordinal, ok := planner.OrdinalOf("etcd", pod)
		if !ok || ordinal >= len(post.revs) {
			continue
		}
		rev := post.revs[ordinal]
		// After someone else's template, a member may have moved on to a newer revision since: only one sent
		// back to the current revision (a revert) contradicts the report then.
		moved := post.updateRev != res.UpdateRevision && rev != post.currentRev
		if rev != res.UpdateRevision && !moved {
			w.violate("e", se, "reported %s rolled to %s, but its pod is at %s", pod, res.UpdateRevision, rev)
			continue
		}
		if _, crashed := w.crashed[pod]; crashed || w.healthy(pod) || w.loops[pod].passedBy != "" {
			continue // down by itself, up, or flapping since its pass, which a run checks only before a disruption
		}
		if ok, why := w.answerable(se, pod); ok {
			w.violate("e", se, "reported %s rolled, but it is not healthy: %s", pod, why)
		}
	}
}

func holderName(h string) string {
	if h == "" {
		return "nobody"
	}
	return h
}

func sortedKeys(m map[string]bool) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}
