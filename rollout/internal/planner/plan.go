package planner

import (
	"cmp"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/etcd-rollout/pulumi-etcd-rollout/rollout/internal/durability"
	"github.com/etcd-rollout/pulumi-etcd-rollout/rollout/internal/replace"
	"github.com/etcd-rollout/pulumi-etcd-rollout/rollout/internal/selfremoval"
)

// ErrBlocked is wrapped by every error that means "the observed state does not allow a rollout to start".
// Nothing has been changed when it is returned; the message names what is wrong.
var ErrBlocked = errors.New("rollout blocked")

// ErrDataDiesWithPod is wrapped when members whose data dies with their pod cannot be replaced safely as the
// template stands (issue 32): a data dir and a WAL dir of different durability, a single member, or a start
// that would found a new cluster. Waiting does not change it: the template must.
var ErrDataDiesWithPod = errors.New("the members' data does not outlive their pods")

// Replaced says member i is replaced, not restarted: its pod, or the pod the template makes, keeps its data
// where a pod delete loses it. Deleting such a pod while its member is listed would bring it back under its
// old member ID with an empty log, which etcd adopts and Raft's durability does not survive; it is removed,
// added back as a learner and promoted instead (internal/replace).
func Replaced(s ClusterState, i int) bool { return s.Members[i].DataLost || templateDataLost(s) }

func templateDataLost(s ClusterState) bool {
	for _, d := range s.Durability {
		if d.Kind.Lost() {
			return true
		}
	}
	return false
}

// AnyDataLost says some member is replaced rather than restarted.
func AnyDataLost(s ClusterState) bool {
	for i := range s.Members {
		if Replaced(s, i) {
			return true
		}
	}
	return templateDataLost(s)
}

// checkDurability refuses, before anything is touched, a roll of members whose data dies with their pod that
// a replacement cannot do safely: a data dir and a WAL dir of different durability (a replacement would keep
// one and lose the other), a single member (there is nobody to replace it from: a roll loses everything), and
// a template that starts etcd with --initial-cluster-state=new, or visibly without it (etcd's default is new:
// the replaced member must join the running cluster as the learner added for it; "new" fails with "member
// has already been bootstrapped", or founds a second cluster).
func checkDurability(s ClusterState) error {
	var lost, kept string
	for _, d := range s.Durability {
		switch {
		case d.Kind == durability.AnyNode:
			return fmt.Errorf("%w: %s: a member restarted on another node finds no data (an empty log under a voting identity), and one replaced on the same node finds the removed member's; pin each pod to its node (a local PersistentVolume in a volumeClaimTemplate does it for you), then run again",
				ErrDataDiesWithPod, d.Why)
		case d.Kind.Lost() && lost == "":
			lost = d.Why
		case (d.Kind == durability.SurvivesPod || d.Kind == durability.SameNodeOnly) && kept == "":
			kept = d.Why
		}
	}
	switch {
	case lost != "" && kept != "":
		return fmt.Errorf("%w: %s, but %s: a member's replacement would lose one and keep the other; put the data dir and the WAL dir on the same kind of volume, then run again",
			ErrDataDiesWithPod, lost, kept)
	case !AnyDataLost(s):
		return nil
	case s.Replicas == 1:
		return fmt.Errorf("%w: the only member's data dies with its pod (%s): restarting it loses every key, and there is no other member to replace it from; move the data dir onto a volumeClaimTemplate (or scale to 3 members) first, then run again",
			ErrDataDiesWithPod, dataWhy(s))
	case s.TemplateInitialClusterStateOmitted:
		return fmt.Errorf("%w: the template starts etcd without --initial-cluster-state, so etcd starts as \"new\", but a member whose data dies with its pod (%s) is replaced: it must join the running cluster as the learner added for it, and as \"new\" it never can; start it with --initial-cluster-state=existing when its data dir is empty and the cluster exists (docs/usage.md, \"Members whose data dies with their pod\"), then run again",
			ErrDataDiesWithPod, dataWhy(s))
	case s.TemplateInitialClusterState == "new":
		return fmt.Errorf("%w: the template starts etcd with --initial-cluster-state=new, but a member whose data dies with its pod (%s) is replaced: it must join the running cluster as the learner added for it, and with \"new\" it fails (\"member has already been bootstrapped\") or founds a cluster of its own; start it with --initial-cluster-state=existing when its data dir is empty and the cluster exists (docs/usage.md, \"Members whose data dies with their pod\"), then run again",
			ErrDataDiesWithPod, dataWhy(s))
	}
	return nil
}

// memberPlans says, per member, where its data lives and how it is rolled.
func memberPlans(s ClusterState) []MemberPlan {
	out := make([]MemberPlan, 0, len(s.Members))
	for i, m := range s.Members {
		mp := MemberPlan{Pod: m.Pod, Data: string(durability.Unknown), Procedure: ProcedureRestart}
		if len(s.Durability) > 0 {
			mp.Data, mp.DataWhy = string(s.Durability[0].Kind), s.Durability[0].Why
		}
		for _, d := range s.Durability {
			if d.Kind.Lost() {
				mp.Data, mp.DataWhy = string(d.Kind), d.Why
			}
		}
		if m.DataLost {
			mp.Data, mp.DataWhy = string(durability.DiesWithPod), m.DataWhy
		}
		if Replaced(s, i) {
			mp.Procedure = ProcedureReplace
		}
		out = append(out, mp)
	}
	return out
}

// dataWhy says, for a person, where a replaced member keeps its data.
func dataWhy(s ClusterState) string {
	for _, d := range s.Durability {
		if d.Kind.Lost() {
			return d.Why
		}
	}
	for _, m := range s.Members {
		if m.DataLost {
			return m.Pod + ": " + m.DataWhy
		}
	}
	return "unknown"
}

// Consents are the risks the user accepted (Config.AcceptPreStopMemberRemoval, Config.AcceptWriteOutage).
type Consents struct {
	PreStopMemberRemoval bool
	WriteOutage          bool
}

// CheckConsents refuses a plan that needs a consent not given: the roll of pods that remove their own
// member when they stop (CheckSelfRemoval, Config.AcceptPreStopMemberRemoval), and the restart of a one-member
// etcd's only member (Config.AcceptWriteOutage). Preview, `etcd-rollout plan` and the run all ask it, so each
// refuses alike; waiting changes neither, so a plan held back is refused too.
func CheckConsents(s ClusterState, p Plan, given Consents) error {
	if err := CheckSelfRemoval(s, p, given.PreStopMemberRemoval); err != nil {
		return err
	}
	if given.WriteOutage || s.Replicas != 1 || len(s.Members) != 1 {
		return nil
	}
	if m := s.Members[0]; p.WriteOutage != nil || m.PodExists && s.UpdateRevision != "" && m.Revision != s.UpdateRevision {
		return singleMemberError(m.Pod)
	}
	return nil
}

// singleMemberError is the refusal of a one-member etcd's restart without Config.AcceptWriteOutage.
func singleMemberError(pod string) error {
	return fmt.Errorf("%w: %w: %s is the only member, so restarting it stops every read and write until it is back (quorum 1 of 1), and waiting changes nothing; to restart it anyway, accept the write outage (acceptWriteOutage, or --accept-write-outage): a verified snapshot is stored first and the outage is measured; or grow the cluster to 3 members first",
		ErrBlocked, ErrSingleMember, pod)
}

// ErrPreStopRemovesMember is wrapped when pods the roll would stop, or the pods it would start, remove their own
// member from etcd in a preStop hook, and the user has not accepted it (Config.AcceptPreStopMemberRemoval).
var ErrPreStopRemovesMember = errors.New("the pods remove their own etcd member when they stop")

// CheckSelfRemoval refuses a plan that restarts members whose pods remove their own member from etcd when they
// stop, unless accepted (Engine.Plan and the run ask it after PlanRollout; so does the provider's preview): every restart would remove a voter with no quorum check, racing the rollout, and the
// start script would add it back as a voter. The hook that runs is the stopping pod's, so the running pods
// are asked first; the template's hook runs at every later restart (and at a revert's delete). Waiting does
// not change it: the error is not ErrBlocked.
//
// A plan held back (ErrBlocked: no member answers yet, say) rolls nothing yet, but waiting does not change the
// hook: its members not at the update revision are the ones the roll will stop, and it is refused at once.
func CheckSelfRemoval(s ClusterState, p Plan, accepted bool) error {
	roll := p.Roll
	if len(roll) == 0 && s.UpdateRevision != "" {
		for i, m := range s.Members {
			if m.PodExists && m.Revision != s.UpdateRevision {
				roll = append(roll, i)
			}
		}
	}
	if accepted || len(roll) == 0 {
		return nil
	}
	for _, ordinal := range roll {
		if m := s.Members[ordinal]; len(m.SelfRemoval) > 0 {
			how := "turn the hook off in the template"
			if len(s.SelfRemoval) == 0 {
				how = "the template no longer has it, but the running pods do, and their hook runs when the roll stops them"
			}
			return selfRemovalError(m.Pod+"'s pod", m.SelfRemoval[0], how)
		}
	}
	if len(s.SelfRemoval) > 0 {
		return selfRemovalError("the pod template", s.SelfRemoval[0], "turn the hook off in the template")
	}
	return nil
}

func selfRemovalError(who string, h selfremoval.Hook, how string) error {
	if h.TurnOff != "" && how == "turn the hook off in the template" {
		how = "turn the hook off (" + h.TurnOff + ")"
	}
	return fmt.Errorf("%w: %s runs `%s` in container %s's preStop hook, so every restart would remove a voter with no quorum check, racing this rollout, and add it back as a voter; %s, then roll with acceptPreStopMemberRemoval: true (CLI: --accept-prestop-member-removal), which also rolls a hook that removes only members above the initial cluster size (a scale-down script), safe to accept",
		ErrPreStopRemovesMember, who, Truncate(h.Command, 200), h.Container, how)
}

// ErrUnsafeStrategy is wrapped when the StatefulSet's update strategy lets its controller disrupt more than one
// member at a time: no waiting fixes it, so preview and the run refuse at once, before anything is touched.
var ErrUnsafeStrategy = errors.New("the StatefulSet's update strategy is unsafe for etcd")

// ErrPeerURLFollowsPod is returned, before anything is touched, for a template whose etcd advertises a peer URL
// built from the pod's IP: a restarted pod comes back on another IP while etcd's member list keeps the old one,
// and the member is stranded (rancher/k3k#1168). Waiting does not fix it; the template must change.
var ErrPeerURLFollowsPod = errors.New("etcd's peer URL changes with the pod")

func Blocked(format string, args ...any) error {
	return &BlockedError{Reason: fmt.Sprintf(format, args...)}
}

// Quorum is the number of voting members a Raft cluster of n voters needs to commit.
func Quorum(n int) int { return n/2 + 1 }

// PlanRollout turns one observation into the ordered steps that bring every member to UpdateRevision.
//
// It is pure: the executor calls it again after every step with a fresh observation, so a plan only has
// to be right for its first step; the rest is what an SRE reads in a preview. It returns an error wrapping
// ErrBlocked when the state does not allow the first disruption (no leader, a learner, a member that is not
// voting, or quorum would be lost with the next member down).
func PlanRollout(s ClusterState, policy LeaderPolicy) (Plan, error) {
	p := Plan{UpdateRevision: s.UpdateRevision}
	pods, err := checkShape(s, policy)
	if err != nil {
		return p, err
	}
	p.Pods = pods
	p.Members = memberPlans(s)
	work, needsRoll := workOrder(s)
	for _, i := range replacedAgain(s) {
		// On the update revision, but its pod went since its promote (or since a run saw it pass): its health
		// says nothing of its lost log, and it is replaced again like a member still to roll.
		if !needsRoll[i] {
			needsRoll[i] = true
			work = append(slices.DeleteFunc(work, func(k int) bool { return k == i }), i)
		}
	}
	if s.Partition < s.Replicas {
		p.Steps = append(p.Steps, Step{Kind: StepLock, Ordinal: s.Replicas})
	}
	if len(work) == 0 {
		return p, nil
	}
	if err := checkRollable(s, needsRoll); err != nil {
		return p, err
	}
	if resumed, ok, err := resumeReplacement(s, p); ok || err != nil {
		return resumed, err
	}
	if err := checkPodsExist(s); err != nil {
		return p, err
	}
	leader, err := checkVoters(s)
	if err != nil {
		return p, err
	}
	if needsRoll[work[0]] && Replaced(s, work[0]) {
		if m := AnotherRolledMemberDown(s, work[0]); m != nil {
			// One member out at a time: a replacement's remove waits for it (a hold, with its timeout).
			return p, Blocked("%s, on %s, is down (%s): %s stays a member until it is back", m.Pod, m.Revision, cmp.Or(m.Problem, "not healthy"), s.Members[work[0]].Pod)
		}
	}
	if needsRoll[work[0]] {
		if k := reviveFirst(s, work, needsRoll); k >= 0 {
			// A member down on an older revision below the next one to roll: bring it back at the current
			// revision first (it is out already, so that costs nothing), then roll as usual.
			p.Steps = append(p.Steps, Step{Kind: StepRecreate, Ordinal: k})
			s = withHealthy(s, k)
		}
		// The restart of a one-member etcd's only member is planned, and refused without consent by
		// CheckConsents: the plan says what the consent would run.
		if err := CheckQuorum(s, work[0], true); err != nil {
			return p, err
		}
		if s.Replicas == 1 {
			p.WriteOutage = &WriteOutagePlan{Pod: s.Members[work[0]].Pod}
		}
	}

	// Simulate the rollout: updated tracks members that will be at UpdateRevision and healthy when the
	// step being planned runs; only those are preferred leader targets, because they never restart again.
	updated := updatedMembers(s)
	transfer := func(to int) {
		p.Steps = append(p.Steps, Step{Kind: StepTransferLeader, From: leader, To: to})
		p.Transfers++
		leader = to
	}
	if policy == LeaderJobLike && leader != 0 && canLead(s, 0, updated) && hasOtherThan(work, needsRoll, 0) {
		transfer(0)
	}
	for n, i := range work {
		if n > 0 {
			p.Steps = append(p.Steps, Step{Kind: StepCooldown, Ordinal: i})
		}
		if needsRoll[i] {
			if leader == i && s.Replicas > 1 { // the only member leads, and keeps leading once it is back
				to, err := leaderTarget(s, policy, i, updated)
				if err != nil {
					return p, err
				}
				transfer(to)
			}
			p.Steps = append(p.Steps, restartStep(s, i))
			if Replaced(s, i) {
				p.Replace = append(p.Replace, i)
			}
			p.Roll = append(p.Roll, i)
		} else {
			p.Wait = append(p.Wait, i)
		}
		p.Steps = append(p.Steps, Step{Kind: StepWaitMember, Ordinal: i})
		updated[i] = true
	}
	p.Steps = append(p.Steps, Step{Kind: StepRelock, Ordinal: s.Replicas})
	p.VersionMove = versionMove(s, p.Roll)
	p.Versions = versionPath(s, p.Roll)
	p.Snapshot = snapshotBeforeNoReturn(s, p)
	return p, planDowngrade(s, &p)
}

// updatedMembers are the members at the update revision, healthy and proven: they never restart again.
func updatedMembers(s ClusterState) map[int]bool {
	updated := map[int]bool{}
	for i, m := range s.Members {
		if m.Revision == s.UpdateRevision && m.Healthy && !NeedsProof(s, m) {
			updated[i] = true
		}
	}
	return updated
}

// checkRollable refuses, before anything is touched, a roll that the StatefulSet's update strategy or its
// members' durability does not allow (waiting fixes neither); a plan with nothing to restart is never refused.
func checkRollable(s ClusterState, needsRoll map[int]bool) error {
	switch {
	case len(needsRoll) == 0:
		return nil
	case s.PeerURLFromPodIP != "":
		return fmt.Errorf("%w: the template advertises etcd's peer URL from the pod's IP (%s), which a restarted pod does not keep: etcd lists the old address, and the member can no longer reach or be reached by its peers; advertise the pod's stable DNS name, https://$(POD_NAME).<service>.$(POD_NAMESPACE).svc:2380, then run again",
			ErrPeerURLFollowsPod, s.PeerURLFromPodIP)
	case s.MaxUnavailable > 1:
		return fmt.Errorf("%w: the StatefulSet's rollingUpdate.maxUnavailable lets the controller take %d members down at once (Kubernetes 1.35 and later honour it by default): a pod someone else deletes and the member the rollout restarts can go down in one sync, and the rollout can keep only its own restarts to one at a time; set spec.updateStrategy.rollingUpdate.maxUnavailable to 1, or remove it, then run again",
			ErrUnsafeStrategy, s.MaxUnavailable)
	}
	return checkDurability(s)
}

// restartStep is the step that takes member i onto the update revision: a lowering of the partition, or a
// replacement when its data dies with its pod.
func restartStep(s ClusterState, i int) Step {
	if Replaced(s, i) {
		return Step{Kind: StepReplace, Ordinal: i}
	}
	return Step{Kind: StepLowerPartition, Ordinal: i, AlreadyDown: !s.Members[i].Healthy}
}

// resumeReplacement finds a replacement a run left half done (its record says it removed the member) and plans
// to finish it before anything else: with the member removed, or a learner in its place, the member set is
// not one the other rules accept, and nothing else may be disrupted until the new member votes. A record whose
// member votes again under its new ID (or whose old member was never removed) needs nothing special: the usual
// rules plan it. What the record and etcd's member list cannot both be is refused (replace.ErrUnsafeRejoin,
// replace.ErrUnexpectedMembership): no step fixes it.
func resumeReplacement(s ClusterState, p Plan) (Plan, bool, error) {
	for _, i := range slices.Sorted(maps.Keys(s.Replacing)) {
		if i >= len(s.Members) {
			continue
		}
		if !s.MembershipKnown {
			// A list nobody gave is not a list without the member: that would read as "removed" (the schedule
			// checker's seed 387 of 10,000 with members whose data dies with their pod).
			return p, false, Blocked("a replacement of %s is in flight, and no member answered for etcd's member list (%s)", s.Members[i].Pod, DescribeMembers(s))
		}
		next, err := replace.Next(ReplaceObserved(s, i, s.Replacing[i]))
		if err != nil {
			return p, false, fmt.Errorf("%s: %w", s.Members[i].Pod, err)
		}
		switch next.Action {
		case replace.Verify, replace.MoveLeader, replace.Remove, replace.ReplaceAgain:
			continue // the plan's own steps: a transfer first, the quorum and one-at-a-time rules (replacedAgain)
		}
		p.Steps = append(p.Steps, Step{Kind: StepReplace, Ordinal: i}, Step{Kind: StepWaitMember, Ordinal: i}, Step{Kind: StepRelock, Ordinal: s.Replicas})
		p.Roll, p.Replace = []int{i}, []int{i}
		return p, true, nil
	}
	return p, false, nil
}

// replacedAgain are the members on the update revision whose record says they are to be replaced again
// (replace.ReplaceAgain, or its remove not made yet): a member the planner would otherwise take for done.
func replacedAgain(s ClusterState) []int {
	if !s.MembershipKnown {
		return nil
	}
	var out []int
	for _, i := range slices.Sorted(maps.Keys(s.Replacing)) {
		if i >= len(s.Members) || s.Members[i].Revision != s.UpdateRevision {
			continue
		}
		next, err := replace.Next(ReplaceObserved(s, i, s.Replacing[i]))
		if err == nil && (next.Action == replace.ReplaceAgain || next.Action == replace.Remove || next.Action == replace.MoveLeader) {
			out = append(out, i)
		}
	}
	return out
}

// ReplaceObserved is what replace.Next reads of member i in s, with its record (nil for none yet).
func ReplaceObserved(s ClusterState, i int, rec replace.Record) replace.Observed {
	m := s.Members[i]
	o := replace.Observed{PeerURL: rec.PeerURL, Record: &rec,
		Pod: replace.Pod{Exists: m.PodExists, UID: m.PodUID, AtUpdateRevision: m.Revision == s.UpdateRevision}}
	for _, mem := range s.Membership {
		o.Members = append(o.Members, replace.Member{ID: mem.ID, Name: mem.Name, PeerURLs: mem.PeerURLs, Learner: mem.IsLearner})
	}
	if l := LeaderOf(s); l != nil {
		o.Leader = l.MemberID
	}
	return o
}

// LeaderOf is the member that answered as leader, nil when none did.
func LeaderOf(st ClusterState) *MemberState {
	for i := range st.Members {
		if st.Members[i].Reachable && st.Members[i].IsLeader {
			return &st.Members[i]
		}
	}
	return nil
}

// checkShape refuses an observation a plan cannot be made from, and names each ordinal's pod.
func checkShape(s ClusterState, policy LeaderPolicy) ([]string, error) {
	switch {
	case s.Replicas < 1:
		return nil, Blocked("the StatefulSet has %d replicas; at least 1 is needed", s.Replicas)
	case len(s.Members) != s.Replicas:
		return nil, Blocked("observed %d members for %d replicas", len(s.Members), s.Replicas)
	case s.UpdateRevision == "":
		return nil, Blocked("the StatefulSet has no updateRevision yet (the controller has not observed it)")
	}
	pods := make([]string, 0, len(s.Members))
	for i, m := range s.Members {
		if m.Ordinal != i {
			return nil, fmt.Errorf("member at index %d has ordinal %d: observation out of order", i, m.Ordinal)
		}
		pods = append(pods, m.Pod)
	}
	switch policy {
	case LeaderLazy, LeaderJobLike, "":
		return pods, nil
	}
	return nil, fmt.Errorf("unknown leader policy %q (want %q or %q)", policy, LeaderLazy, LeaderJobLike)
}

// workOrder lists the members that need work and which of them must restart (not at the update revision)
// rather than only be waited for (not healthy, or not proven). The ones only waited for come first: each was
// disrupted already (by an earlier run, a crash, someone else), and nothing more is disrupted until etcd says
// it is back (the schedule checker's seed 14368 of 100,000: a resumed run restarted etcd-4 while etcd-3, left
// on the update revision and crash-looping, waited its turn behind it). The restarts follow in the only order
// a partition allows, N-1 down to 0.
func workOrder(s ClusterState) (work []int, needsRoll map[int]bool) {
	needsRoll = map[int]bool{}
	var roll []int
	for i := s.Replicas - 1; i >= 0; i-- {
		m := s.Members[i]
		switch {
		case m.Revision != s.UpdateRevision:
			roll = append(roll, i)
			needsRoll[i] = true
		case !m.Healthy, NeedsProof(s, m):
			work = append(work, i)
		}
	}
	return append(work, roll...), needsRoll
}

// NeedsProof says m is at the update revision without this run having seen it pass its gates there, while
// that revision is not yet the StatefulSet's current one: an earlier run (cancelled, timed out, killed, or
// one that lost its lease) left it there, and one healthy look proves nothing of a member that may crash-loop.
// It is waited for with the full stability window, then watched like a member this run rolled.
func NeedsProof(s ClusterState, m MemberState) bool {
	return m.Revision == s.UpdateRevision && s.UpdateRevision != s.CurrentRevision && !m.Proven
}

// reviveFirst picks the member to bring back before the next member rolls: one that is down on a revision that
// is neither the current nor the update one (left there by a run that stopped on a broken template, or by a
// template applied over a rollout's work), -1 when there is none. It is out already, and restarting the next
// member while it stays out disrupts two at once, even where the others keep a quorum (the schedule checker's
// seed 56166 of 100,000: a new template's run restarted etcd-4 while etcd-3, rolled onto the template before and
// crashed there, stayed down). A member down on the current revision may be on its way back (a slow start, a
// node reboot); it is waited for, not restarted. One that does not answer us may be up, and is brought back
// only when the next roll needs it for a quorum.
func reviveFirst(s ClusterState, work []int, needsRoll map[int]bool) int {
	if s.CurrentRevision == "" {
		return -1
	}
	quorumKept := CheckQuorum(s, work[0], false) == nil
	for _, k := range work[1:] {
		m := s.Members[k]
		stale := m.Revision != s.CurrentRevision && m.Revision != s.UpdateRevision
		if !needsRoll[k] || !stale || m.Healthy || Replaced(s, k) {
			continue // a member whose data dies with its pod is never brought back by a delete: it is replaced
		}
		if quorumKept && !m.Unseen || !quorumKept && CheckQuorum(withHealthy(s, k), work[0], false) == nil {
			return k
		}
	}
	return -1
}

// withHealthy is s as it will be once member k is back: what the rest of the plan is made from.
func withHealthy(s ClusterState, k int) ClusterState {
	s.Members = append([]MemberState(nil), s.Members...)
	s.Members[k].Healthy = true
	return s
}

// versionMove says whether rolling changes etcd's minor version, read from what each member reports (its
// image tag while it does not answer) and the template's image tag, and which member's restart is the point of no return: once the
// last member on the old minor runs the new one, etcd raises the cluster version, and a member of the old
// minor can no longer rejoin.
func versionMove(s ClusterState, roll []int) *VersionMove {
	to, ok := TemplateVersion(s)
	if !ok {
		return nil
	}
	var move *VersionMove
	for _, i := range roll {
		from, _, ok := MemberVersion(s.Members[i])
		if !ok || (from.Major == to.Major && from.Minor == to.Minor) {
			continue
		}
		if move == nil {
			move = &VersionMove{From: from, To: to}
		}
		move.After = i
	}
	return move
}

// snapshotBeforeNoReturn plans a snapshot before the first restart of a roll that changes the minor version
// while the cluster version is not yet the target's: once it is (every member on the new minor after an
// upgrade, etcd's downgrade enabled for a downgrade), the members of the old minor can no longer rejoin, and
// only a snapshot rolls back (etcd's upgrade guide). A cluster version nobody can read counts as not yet.
func snapshotBeforeNoReturn(s ClusterState, p Plan) *SnapshotPlan {
	move := p.VersionMove
	first, ok := p.FirstDisruption()
	switch {
	case !ok:
		return nil
	case p.WriteOutage != nil:
		// The only member restarts: no peer holds its data while it is down, whatever the versions.
		return &SnapshotPlan{Before: first.Ordinal, Required: true}
	case move == nil:
		return nil
	}
	if cluster, ok := ParseVersion(s.ClusterVersion); ok && cluster.Major == move.To.Major && cluster.Minor == move.To.Minor {
		return nil
	}
	return &SnapshotPlan{Before: first.Ordinal}
}

// firstDisruption is the plan's first step that takes a member down (a restart by a lowered partition, or a
// replacement's remove): what a snapshot before a point of no return and a trust check before a leader move
// are for.
func (p Plan) FirstDisruption() (Step, bool) {
	i := slices.IndexFunc(p.Steps, func(st Step) bool { return st.Kind == StepLowerPartition || st.Kind == StepReplace })
	if i < 0 {
		return Step{}, false
	}
	return p.Steps[i], true
}

// sharedCertRefusal is the refusal of the engine's connections that every member's certificate met alike (a
// CA swapped in one step in the Secret the engine reads too), said once: per member, three members made a
// first line of 2,403 characters (review 3). nil when the members' problems differ.
func sharedCertRefusal(s ClusterState) *MemberProblemError {
	cause, pods := "", make([]string, 0, len(s.Members))
	for _, m := range s.Members {
		c := m.CertRefusal
		if c == "" || (cause != "" && c != cause) {
			return nil
		}
		cause, pods = c, append(pods, m.Pod)
	}
	if cause == "" {
		return nil
	}
	return &MemberProblemError{Pod: strings.Join(pods, ", "), Reason: ProblemCertificateRefused, Problem: cause}
}

// checkPodsExist holds the plan while a member's pod does not exist: the controller creates it on its own (a
// new cluster, OrderedReady), and until then nobody knows which revision it will run; a partition lowered for
// it would be a restart of nothing.
func checkPodsExist(s ClusterState) error {
	for _, m := range s.Members {
		if !m.PodExists {
			return Blocked("%s does not exist yet: waiting for the StatefulSet controller to create it (%s)", m.Pod, DescribeMembers(s))
		}
	}
	return nil
}

// checkVoters returns the leader's ordinal, or why the member set is not one a rollout may disturb.
func checkVoters(s ClusterState) (int, error) {
	reachable := 0
	for _, m := range s.Members {
		if m.Reachable {
			reachable++
		}
	}
	if reachable == 0 {
		if shared := sharedCertRefusal(s); shared != nil {
			return -1, fmt.Errorf("%w: no etcd member answered: %w", ErrBlocked, shared)
		}
		return -1, Blocked("no etcd member answered (%s)", DescribeMembers(s))
	}
	if s.Learners > 0 {
		if len(s.Replacing) == 0 {
			return -1, learnerLeftBehind(s)
		}
		return -1, Blocked("the etcd member list has %d learner(s); promote or remove them first", s.Learners)
	}
	if s.VotingMembers != s.Replicas {
		return -1, Blocked("the etcd member list has %d voting members but the StatefulSet has %d replicas", s.VotingMembers, s.Replicas)
	}
	leader := -1
	for _, m := range s.Members {
		if m.Reachable && m.IsLearner {
			return -1, Blocked("%s is a learner, not a voting member", m.Pod)
		}
		if m.Reachable && m.IsLeader {
			if leader >= 0 {
				return -1, Blocked("both %s and %s claim to be leader", s.Members[leader].Pod, m.Pod)
			}
			leader = m.Ordinal
		}
	}
	if leader < 0 {
		return -1, Blocked("the cluster has no leader (%s)", DescribeMembers(s))
	}
	return leader, nil
}

// learnerLeftBehind refuses a member list with a learner that no replacement of this rollout added (no record
// names one): etcd never promotes a learner by itself and this run has no step that would, so no waiting
// helps (issue 34, item 1). A replacement in flight keeps the usual hold: its learner is its own to promote.
func learnerLeftBehind(s ClusterState) error {
	var names []string
	for _, m := range s.Membership {
		if m.IsLearner {
			names = append(names, fmt.Sprintf("%x (%s)", m.ID, cmp.Or(strings.Join(m.PeerURLs, ","), m.Name, "no peer URL")))
		}
	}
	return fmt.Errorf("%w: %w: the etcd member list has learner %s, which no replacement of this rollout added, and etcd never promotes a learner by itself; promote it once it has caught up (etcdctl member promote) or remove it (etcdctl member remove), then run again",
		ErrBlocked, ErrLearnerLeftBehind, strings.Join(names, ", "))
}

// CheckQuorum applies the rule "healthy − quorum ≥ 1": the members left running while target is down must
// still form a quorum on their own. A member that needs proof on the update revision (NeedsProof) does not
// count: one healthy look at a member that may crash-loop says nothing of whether it stays up. A one-member
// etcd keeps no quorum while its member is down: that is refused unless outageAccepted
// (Config.AcceptWriteOutage).
func CheckQuorum(s ClusterState, target int, outageAccepted bool) error {
	if s.Replicas == 1 {
		if outageAccepted {
			return nil
		}
		return singleMemberError(s.Members[target].Pod)
	}
	q := Quorum(s.Replicas)
	others := 0
	for _, m := range s.Members {
		if m.Ordinal != target && m.Healthy && !NeedsProof(s, m) {
			others++
		}
	}
	if others < q {
		return Blocked("restarting %s would leave %d healthy member(s), quorum is %d of %d (%s)",
			s.Members[target].Pod, others, q, s.Replicas, DescribeMembers(s))
	}
	return nil
}

// leaderTarget picks where the leader goes before target restarts: an updated healthy member (the highest
// ordinal, updated longest ago) so it never has to move again; else, for the lazy policy, the lowest healthy
// ordinal; for the job-like policy, member N-1 as the old Job did. Every rule takes only a member that can lead
// (canLead).
func leaderTarget(s ClusterState, policy LeaderPolicy, target int, updated map[int]bool) (int, error) {
	if policy == LeaderJobLike && target == 0 && s.Replicas > 1 && canLead(s, s.Replicas-1, updated) {
		return s.Replicas - 1, nil
	}
	for i := s.Replicas - 1; i >= 0; i-- {
		if i != target && updated[i] {
			return i, nil
		}
	}
	for i := 0; i < s.Replicas; i++ {
		if i != target && canLead(s, i, updated) {
			return i, nil
		}
	}
	return -1, Blocked("no healthy voting member can take the leadership from %s", s.Members[target].Pod)
}

// canLead says member i may take the leadership when the step being planned runs: healthy and proven (a member
// at the update revision that no run saw pass may crash-loop, and its crash would cost an election), or updated
// by an earlier step of the plan, which proves it first.
func canLead(s ClusterState, i int, updated map[int]bool) bool {
	return updated[i] || (s.Members[i].Healthy && !NeedsProof(s, s.Members[i]))
}

func hasOtherThan(work []int, needsRoll map[int]bool, ordinal int) bool {
	for _, i := range work {
		if i != ordinal && needsRoll[i] {
			return true
		}
	}
	return false
}

// DescribeMembers is a one-line health summary for error messages: "etcd-0 healthy, etcd-1 down: ...".
func DescribeMembers(s ClusterState) string {
	parts := make([]string, 0, len(s.Members))
	for _, m := range s.Members {
		switch {
		case m.Healthy && m.IsLeader:
			parts = append(parts, m.Pod+" healthy leader")
		case m.Healthy:
			parts = append(parts, m.Pod+" healthy")
		case m.Problem != "":
			parts = append(parts, m.Pod+" unhealthy: "+m.Problem)
		default:
			parts = append(parts, m.Pod+" unhealthy")
		}
	}
	return strings.Join(parts, "; ")
}
