package rollout

import (
	"context"
	"fmt"
	"sort"
	"strings"

	"github.com/etcd-rollout/pulumi-etcd-rollout/rollout/internal/member"
)

// The fake etcd's membership (issue 32): members removed, learners added and promoted, and what a member whose
// data dies with its pod does when its pod is recreated, the way etcd's bootstrap does it
// (../shared/notes/shapes.md §1.2): with its old member still listed, it adopts the old ID with an empty log
// (recorded in adopted: the unsafe rejoin the engine must never cause); removed and not added back, it fails
// to start ("no match found for existing member") until a learner is added for its peer URL; added as a
// learner, it starts as that learner.

// membership is the fake's state of members that left or joined; the zero value is a cluster of voters.
type membership struct {
	// ephemeral says every member's data dies with its pod.
	ephemeral bool
	// removed names pods whose member was removed (its process exits, as etcd does once removed).
	removed map[string]bool
	// unstarted names pods whose learner was added but whose process has not started it.
	unstarted map[string]bool
	// waitingForAdd names pods recreated empty after their member was removed: they start once added.
	waitingForAdd map[string]bool
	// slow names pods whose learner never catches up: its applied index stays at 0 and etcd refuses to promote
	// it (ErrLearnerNotReady).
	slow map[string]bool
	// adopted names, in order, pods that came back with an empty data dir under the ID that voted before;
	// adoptedID the ID each last did so under.
	adopted   []string
	adoptedID map[string]uint64
	// addedIDs counts learners added, for their IDs.
	addedIDs uint64
}

// peerURL is pod's peer URL, the name a member keeps across a replacement.
func peerURL(pod string) string { return "https://" + pod + ".etcd.db.svc:2380" }

// podOfPeerURL is the pod a peer URL names ("" when none).
func podOfPeerURL(url string) string {
	host, ok := strings.CutPrefix(url, "https://")
	if !ok {
		return ""
	}
	pod, _, _ := strings.Cut(host, ".")
	return pod
}

func (f *fakeEtcd) MemberRemove(_ context.Context, via string, id uint64) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.refusesCalls(via) {
		return fmt.Errorf("remove member %x through %s: connection refused", id, via)
	}
	pod, ok := f.memberWithID(id)
	if !ok {
		return fmt.Errorf("remove member %x through %s: %w", id, via, member.ErrMemberNotFound)
	}
	if !f.learner[pod] {
		// etcd's strict reconfiguration check: the started voters left must still be a quorum of the voters left.
		voters, up := 0, 0
		for p := range f.ids {
			if p != pod && !f.membership.removed[p] && !f.learner[p] {
				voters++
				if !f.isDown(p) {
					up++
				}
			}
		}
		if up < voters/2+1 {
			return fmt.Errorf("remove member %x through %s: %w", id, via, member.ErrClusterNotReadyForChange)
		}
	}
	f.membership.mark(&f.membership.removed, pod)
	delete(f.learner, pod)
	delete(f.membership.unstarted, pod)
	f.down[pod] = true // a removed member's etcd stops
	if f.leader == pod {
		f.electOtherThan(pod)
	}
	return nil
}

func (f *fakeEtcd) MemberAddAsLearner(_ context.Context, via, url string) (member.Info, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.refusesCalls(via) {
		return member.Info{}, fmt.Errorf("add a learner at %s through %s: connection refused", url, via)
	}
	pod := podOfPeerURL(url)
	if _, listed := f.ids[pod]; pod == "" || (listed && !f.membership.removed[pod]) {
		return member.Info{}, fmt.Errorf("add a learner at %s through %s: %w", url, via, member.ErrPeerURLExists)
	}
	for p := range f.ids {
		if f.learner[p] && !f.membership.removed[p] {
			return member.Info{}, fmt.Errorf("add a learner at %s through %s: %w", url, via, member.ErrTooManyLearners)
		}
	}
	f.membership.addedIDs++
	id := 0xd00 + f.membership.addedIDs
	f.ids[pod] = id
	delete(f.membership.removed, pod)
	f.learner[pod] = true
	f.membership.mark(&f.membership.unstarted, pod)
	if f.membership.waitingForAdd[pod] {
		f.startLearner(pod)
	}
	return member.Info{ID: id, IsLearner: true, PeerURLs: []string{url}}, nil
}

func (f *fakeEtcd) MemberPromote(_ context.Context, via string, id uint64) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.refusesCalls(via) {
		return fmt.Errorf("promote learner %x through %s: connection refused", id, via)
	}
	pod, ok := f.memberWithID(id)
	switch {
	case !ok:
		return fmt.Errorf("promote learner %x through %s: %w", id, via, member.ErrMemberNotFound)
	case !f.learner[pod]:
		return fmt.Errorf("promote learner %x through %s: %w", id, via, member.ErrNotLearner)
	case f.membership.unstarted[pod] || f.isDown(pod) || f.membership.slow[pod]:
		return fmt.Errorf("promote learner %x through %s: %w", id, via, member.ErrLearnerNotReady)
	}
	delete(f.learner, pod)
	return nil
}

// refusesCalls says a call through via does not reach etcd (down, unseen, or its client port refusing us);
// f.mu is held.
func (f *fakeEtcd) refusesCalls(via string) bool {
	return f.isDown(via) || f.unseen[via] || f.refusing[via]
}

// memberWithID is the pod whose listed member has id; f.mu is held.
func (f *fakeEtcd) memberWithID(id uint64) (string, bool) {
	for p, pid := range f.ids {
		if pid == id && !f.membership.removed[p] {
			return p, true
		}
	}
	return "", false
}

// startsEmpty is a member whose data died with its pod starting in its new pod, as etcd's bootstrap decides
// with --initial-cluster-state=existing; f.mu is held.
func (f *fakeEtcd) startsEmpty(pod string) {
	m := &f.membership
	switch {
	case m.removed[pod]:
		f.down[pod] = true // "no match found for existing member": it fails until added back
		m.mark(&m.waitingForAdd, pod)
	case f.learner[pod] && m.unstarted[pod]:
		f.startLearner(pod)
	default:
		m.adopted = append(m.adopted, pod) // the old voter's ID, with an empty log
		if m.adoptedID == nil {
			m.adoptedID = map[string]uint64{}
		}
		m.adoptedID[pod] = f.ids[pod]
	}
}

// startLearner starts pod's process as the learner added for its peer URL; f.mu is held.
func (f *fakeEtcd) startLearner(pod string) {
	delete(f.membership.unstarted, pod)
	delete(f.membership.waitingForAdd, pod)
	delete(f.down, pod)
	f.bumpIncarnation(pod)
}

func (m *membership) mark(set *map[string]bool, pod string) {
	if *set == nil {
		*set = map[string]bool{}
	}
	(*set)[pod] = true
}

// adoptedPods is a copy of the pods that adopted their old ID with an empty log.
func (f *fakeEtcd) adoptedPods() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]string(nil), f.membership.adopted...)
}

// emptyVoters are the pods whose member votes now under the ID it adopted with an empty log; f.mu is held.
func (f *fakeEtcd) emptyVoters() []string {
	var out []string
	for pod, id := range f.membership.adoptedID {
		if f.ids[pod] == id && !f.membership.removed[pod] && !f.learner[pod] {
			out = append(out, pod)
		}
	}
	sort.Strings(out)
	return out
}
