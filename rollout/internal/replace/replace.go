// Package replace decides the next step of replacing an etcd member whose data dies with its pod (an emptyDir,
// a generic ephemeral or inline CSI volume, no volume at all): remove the old member, let its pod go, add the
// peer URL back as a learner, let the new pod start it, promote it once caught up (issue 32;
// ../shared/notes/shapes.md §1 has etcd's guidance).
//
// It is pure and knows no run: Next reads what etcd's member list says of the member's peer URL, what the
// pod is, and the Record a run wrote before its first membership change, and names the one step that comes
// next. A run killed anywhere in the procedure leaves etcd's member list, the pod and the Record behind, and
// the next run's Next picks up from there: each crash window (after the remove, after the add, after the
// promote) is a state this function reads, not a memory of the run.
//
// What it refuses is what no step can fix: the old member ID back on a pod that lost its data (etcd adopted
// it: the old voter with an empty log), a learner or a missing member nobody recorded adding or removing, and
// a peer URL etcd lists twice.
package replace

import (
	"errors"
	"fmt"
	"slices"
)

// Member is one entry of etcd's member list.
type Member struct {
	ID       uint64
	Name     string // empty until the member's process has started and published itself
	PeerURLs []string
	Learner  bool
}

// Started says the member's process has joined the cluster and published its name.
func (m Member) Started() bool { return m.Name != "" }

// Pod is what the StatefulSet's pod for the member is now.
type Pod struct {
	// Exists is false between a delete and the controller's recreation.
	Exists bool
	UID    string
	// AtUpdateRevision says the pod runs the template the rollout rolls to.
	AtUpdateRevision bool
}

// Record is what a run writes (to the rollout's status ConfigMap) before it removes the old member, and
// completes after it adds the learner: the only memory that crosses a killed run, deleted once the new member
// passed its gates. Zero values are unknown.
type Record struct {
	// PeerURL is the member's peer URL, read from etcd's member list before the remove: after it, nothing
	// else lists it.
	PeerURL string `json:"peerURL"`
	// OldID is the member ID the replaced member had; OldPodUID the pod that held its data.
	OldID     uint64 `json:"oldID"`
	OldPodUID string `json:"oldPodUID"`
	// LearnerID is the ID etcd gave the learner added for the peer URL (0 until the add's answer was recorded).
	LearnerID uint64 `json:"learnerID,omitempty"`
	// LearnerPodUID is the pod whose etcd started the learner and holds its data, recorded before the promote:
	// the new voter's data lives and dies with that pod.
	LearnerPodUID string `json:"learnerPodUID,omitempty"`
}

// Observed is one look at the member being replaced.
type Observed struct {
	// PeerURL is the member's peer URL: the name that does not change across a replacement.
	PeerURL string
	// Members is etcd's member list, from a member that answered.
	Members []Member
	// Leader is the current leader's member ID (0 when unknown).
	Leader uint64
	Pod    Pod
	// Record is nil when no run has started replacing this member.
	Record *Record
}

// Action is one step of the procedure.
type Action string

const (
	// MoveLeader moves leadership off the member first: removing the leader costs an election.
	MoveLeader Action = "move-leader"
	// Remove removes the old member ID (the quorum check counts it removed; the lease is confirmed first).
	// The run writes the Record before it.
	Remove Action = "remove"
	// LetPodGo deletes the pod that held the old member's data (lowering the partition when the pod is on an
	// older revision, so that the controller recreates it at the update revision), so that its volume goes.
	LetPodGo Action = "let-pod-go"
	// AwaitPod waits for the controller to recreate the pod.
	AwaitPod Action = "await-pod"
	// AddLearner adds the peer URL back as a learner (remove before add: the URL must be free).
	AddLearner Action = "add-learner"
	// AwaitStart waits for the new pod's etcd to start the learner (the member list names it then).
	AwaitStart Action = "await-start"
	// Promote promotes the learner once its applied index is close to the leader's.
	Promote Action = "promote"
	// Verify runs the usual gates on the new voter: the replacement itself is done.
	Verify Action = "verify"
	// ReplaceAgain removes the new voter, whose pod went after its promote (a drain, an eviction, a delete):
	// its data died with that pod, and a pod that comes back would run an empty log under an ID that voted.
	// The run writes a new Record (AgainRecord) before the remove, and the procedure starts over.
	ReplaceAgain Action = "replace-again"
)

// Step is what Next decides: the action and the member ID it concerns.
type Step struct {
	Action Action
	// ID is the member the action is about: the old ID for MoveLeader and Remove, the learner's for
	// AwaitStart and Promote, the new voter's for Verify.
	ID uint64
	// Why says, for a person, what state led to the action.
	Why string
}

// ErrUnsafeRejoin is returned when the pod that lost the member's data runs under the old member ID: etcd
// adopted the identity of a voter whose log is gone (it can vote twice in a term; entries it acknowledged may
// now live on a minority only). No step fixes it from here; a person must remove that member and add it back.
var ErrUnsafeRejoin = errors.New("a member that lost its data runs under its old member ID")

// ErrUnexpectedMembership is returned when etcd's member list holds what no run recorded doing for the peer
// URL (a learner nobody recorded adding, a member missing that nobody recorded removing, the URL listed
// twice): something else changes membership, and a replacement would race it.
var ErrUnexpectedMembership = errors.New("etcd's member list is not what this rollout left")

// Next names the step that comes next for the member at o.PeerURL.
func Next(o Observed) (Step, error) {
	var at []Member
	for _, m := range o.Members {
		if slices.Contains(m.PeerURLs, o.PeerURL) {
			at = append(at, m)
		}
	}
	switch {
	case len(at) > 1:
		return Step{}, fmt.Errorf("%w: %d members list peer URL %s (IDs %s)", ErrUnexpectedMembership, len(at), o.PeerURL, ids(at))
	case len(at) == 0:
		return o.missing()
	case at[0].Learner:
		return o.learner(at[0])
	}
	return o.voter(at[0])
}

// voter: the peer URL belongs to a voter, the old member (not yet removed) or the new one (promoted).
func (o Observed) voter(m Member) (Step, error) {
	r := o.Record
	switch {
	case r != nil && r.LearnerID != 0 && m.ID == r.LearnerID && r.LearnerPodUID != "" && o.Pod.UID != r.LearnerPodUID:
		return Step{Action: ReplaceAgain, ID: m.ID, Why: fmt.Sprintf("member %x, promoted from the learner pod %s started, is on %s now: its data died with that pod, so it is replaced again",
			m.ID, r.LearnerPodUID, o.podName())}, nil
	case r != nil && r.LearnerID != 0 && m.ID == r.LearnerID:
		return Step{Action: Verify, ID: m.ID, Why: fmt.Sprintf("member %x, added as a learner for %s, is a voter", m.ID, o.PeerURL)}, nil
	case r != nil && r.OldID != 0 && m.ID != r.OldID:
		// Promoted before its ID was recorded: a new ID on the URL is the learner this run added.
		return Step{Action: Verify, ID: m.ID, Why: fmt.Sprintf("member %x replaced %x at %s and is a voter", m.ID, r.OldID, o.PeerURL)}, nil
	case o.Pod.Exists && o.Pod.UID != "" && r != nil && r.OldPodUID != "" && o.Pod.UID != r.OldPodUID:
		return Step{}, o.unsafeRejoin(m.ID)
	case o.Pod.Exists && r == nil && o.Pod.AtUpdateRevision:
		// Nobody recorded replacing it, yet its pod is at the update revision: someone else recreated it, and
		// it came back with an empty data dir under the ID that voted before.
		return Step{}, o.unsafeRejoin(m.ID)
	case m.ID == o.Leader:
		return Step{Action: MoveLeader, ID: m.ID, Why: fmt.Sprintf("member %x leads: removing the leader costs an election", m.ID)}, nil
	}
	return Step{Action: Remove, ID: m.ID, Why: fmt.Sprintf("member %x at %s is the old member", m.ID, o.PeerURL)}, nil
}

// learner: the peer URL belongs to a learner, which must be the one this run's Record added.
func (o Observed) learner(m Member) (Step, error) {
	r := o.Record
	if r == nil || r.OldID == 0 {
		return Step{}, fmt.Errorf("%w: learner %x at %s was not added by a rollout this one can resume (no record of removing the member it replaces): remove it (etcdctl member remove %x) or promote it yourself, then run again",
			ErrUnexpectedMembership, m.ID, o.PeerURL, m.ID)
	}
	if r.LearnerID != 0 && r.LearnerID != m.ID {
		return Step{}, fmt.Errorf("%w: learner %x at %s is not %x, the learner this rollout added: remove it (etcdctl member remove %x), then run again",
			ErrUnexpectedMembership, m.ID, o.PeerURL, r.LearnerID, m.ID)
	}
	switch {
	case o.Pod.Exists && o.Pod.UID == r.OldPodUID:
		// The pod with the old data is still there (a learner added before it went): it goes first, or its
		// process could start the learner with the removed member's data.
		return Step{Action: LetPodGo, ID: m.ID, Why: "the pod that held the removed member's data is still there"}, nil
	case !o.Pod.Exists:
		return Step{Action: AwaitPod, ID: m.ID, Why: "waiting for the controller to recreate the pod"}, nil
	case !m.Started():
		return Step{Action: AwaitStart, ID: m.ID, Why: fmt.Sprintf("learner %x waits for the new pod's etcd to start it", m.ID)}, nil
	}
	return Step{Action: Promote, ID: m.ID, Why: fmt.Sprintf("learner %x has started", m.ID)}, nil
}

// missing: no member has the peer URL: the old one was removed; its pod goes, then the learner is added.
func (o Observed) missing() (Step, error) {
	r := o.Record
	if r == nil || r.OldID == 0 {
		return Step{}, fmt.Errorf("%w: no member has peer URL %s and no rollout recorded removing it (a preStop hook that runs `etcdctl member remove`, or a person): add it back as a learner, or scale the StatefulSet to the members etcd lists, then run again",
			ErrUnexpectedMembership, o.PeerURL)
	}
	switch {
	case o.Pod.Exists && o.Pod.UID == r.OldPodUID:
		return Step{Action: LetPodGo, ID: r.OldID, Why: fmt.Sprintf("member %x is removed; its pod holds the old data", r.OldID)}, nil
	case !o.Pod.Exists:
		return Step{Action: AwaitPod, ID: r.OldID, Why: "waiting for the controller to recreate the pod"}, nil
	}
	return Step{Action: AddLearner, ID: r.OldID, Why: fmt.Sprintf("member %x is removed and its pod is new: %s is free", r.OldID, o.PeerURL)}, nil
}

// AgainRecord is the Record a run writes before ReplaceAgain's remove: the promoted member is the old one now,
// and the pod that holds what is left of its data (none, or an empty log) is the one that must go.
func (o Observed) AgainRecord(id uint64) Record {
	rec := Record{PeerURL: o.PeerURL, OldID: id}
	if o.Pod.Exists {
		rec.OldPodUID = o.Pod.UID
	}
	return rec
}

// podName says which pod the member is on, for a person.
func (o Observed) podName() string {
	if !o.Pod.Exists {
		return "no pod (deleted, not yet recreated)"
	}
	return "pod " + o.Pod.UID
}

func (o Observed) unsafeRejoin(id uint64) error {
	return fmt.Errorf("%w: member %x at %s runs on a pod that lost its data, under the ID that voted before: remove it (etcdctl member remove %x) and add it back as a learner, or restore it from a snapshot, before anything else restarts; the partition stays locked",
		ErrUnsafeRejoin, id, o.PeerURL, id)
}

func ids(ms []Member) string {
	s := ""
	for i, m := range ms {
		if i > 0 {
			s += ", "
		}
		s += fmt.Sprintf("%x", m.ID)
	}
	return s
}
