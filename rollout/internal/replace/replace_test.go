package replace

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

const url = "https://etcd-1.etcd.db.svc:2380"

func voter(id uint64, name, peer string) Member {
	return Member{ID: id, Name: name, PeerURLs: []string{peer}}
}

func others() []Member {
	return []Member{voter(0xa, "etcd-0", "https://etcd-0.etcd.db.svc:2380"), voter(0xc, "etcd-2", "https://etcd-2.etcd.db.svc:2380")}
}

func with(ms ...Member) []Member { return append(others(), ms...) }

// Every state a run can leave the member in, killed anywhere, names the step that finishes the replacement,
// or refuses what no step fixes.
func TestNext(t *testing.T) {
	oldPod := Pod{Exists: true, UID: "uid-old"}
	newPod := Pod{Exists: true, UID: "uid-new", AtUpdateRevision: true}
	rec := &Record{OldID: 0xb, OldPodUID: "uid-old"}
	recAdded := &Record{OldID: 0xb, OldPodUID: "uid-old", LearnerID: 0xd}
	learner := Member{ID: 0xd, PeerURLs: []string{url}, Learner: true}
	startedLearner := Member{ID: 0xd, Name: "etcd-1", PeerURLs: []string{url}, Learner: true}
	recPromoted := &Record{OldID: 0xb, OldPodUID: "uid-old", LearnerID: 0xd, LearnerPodUID: "uid-new"}
	recreated := Pod{Exists: true, UID: "uid-recreated", AtUpdateRevision: true}

	tests := []struct {
		name    string
		o       Observed
		want    Action
		wantID  uint64
		wantErr error
	}{
		{"the old member leads: the leader moves first", Observed{Members: with(voter(0xb, "etcd-1", url)), Leader: 0xb, Pod: oldPod}, MoveLeader, 0xb, nil},
		{"the old member follows: it is removed", Observed{Members: with(voter(0xb, "etcd-1", url)), Leader: 0xa, Pod: oldPod}, Remove, 0xb, nil},
		{"killed after the record, before the remove: it is removed", Observed{Members: with(voter(0xb, "etcd-1", url)), Leader: 0xa, Pod: oldPod, Record: rec}, Remove, 0xb, nil},
		{"removed, the old pod still there: it goes", Observed{Members: others(), Pod: oldPod, Record: rec}, LetPodGo, 0xb, nil},
		{"removed, the pod is being recreated: wait for it", Observed{Members: others(), Pod: Pod{}, Record: rec}, AwaitPod, 0xb, nil},
		{"removed, the pod is new: the URL is free, the learner is added", Observed{Members: others(), Pod: newPod, Record: rec}, AddLearner, 0xb, nil},
		{"killed after the add, before its ID was recorded: the learner is this run's", Observed{Members: with(learner), Pod: newPod, Record: rec}, AwaitStart, 0xd, nil},
		{"the learner waits for the new pod's etcd", Observed{Members: with(learner), Pod: newPod, Record: recAdded}, AwaitStart, 0xd, nil},
		{"the learner started: it is promoted once caught up", Observed{Members: with(startedLearner), Pod: newPod, Record: recAdded}, Promote, 0xd, nil},
		{"a learner added while the old pod stood: the old pod goes first", Observed{Members: with(learner), Pod: oldPod, Record: recAdded}, LetPodGo, 0xd, nil},
		{"a learner whose pod is being recreated: wait for the pod", Observed{Members: with(learner), Pod: Pod{}, Record: recAdded}, AwaitPod, 0xd, nil},
		{"killed after the promote: the new voter is verified", Observed{Members: with(voter(0xd, "etcd-1", url)), Pod: newPod, Record: recAdded}, Verify, 0xd, nil},
		{"promoted before its ID was recorded: a new ID on the URL is verified", Observed{Members: with(voter(0xd, "etcd-1", url)), Pod: newPod, Record: rec}, Verify, 0xd, nil},
		{"the old ID on the new pod: etcd adopted it with an empty log", Observed{Members: with(voter(0xb, "etcd-1", url)), Pod: newPod, Record: rec}, "", 0, ErrUnsafeRejoin},
		{"the old ID on a pod someone else recreated before any record", Observed{Members: with(voter(0xb, "etcd-1", url)), Pod: newPod}, "", 0, ErrUnsafeRejoin},
		{"a learner nobody recorded adding", Observed{Members: with(learner), Pod: newPod}, "", 0, ErrUnexpectedMembership},
		{"a learner other than the one this run added", Observed{Members: with(Member{ID: 0xe, PeerURLs: []string{url}, Learner: true}), Pod: newPod, Record: recAdded}, "", 0, ErrUnexpectedMembership},
		{"a member missing that nobody recorded removing (a preStop hook)", Observed{Members: others(), Pod: oldPod}, "", 0, ErrUnexpectedMembership},
		{"promoted, on the pod that started it: verified", Observed{Members: with(voter(0xd, "etcd-1", url)), Pod: newPod, Record: recPromoted}, Verify, 0xd, nil},
		{"promoted, its pod recreated since: its data died, replaced again", Observed{Members: with(voter(0xd, "etcd-1", url)), Pod: recreated, Record: recPromoted}, ReplaceAgain, 0xd, nil},
		{"promoted, its pod deleted and not back yet: replaced again, membership first", Observed{Members: with(voter(0xd, "etcd-1", url)), Pod: Pod{}, Record: recPromoted}, ReplaceAgain, 0xd, nil},
		{"the URL listed twice", Observed{Members: with(voter(0xb, "etcd-1", url), learner), Pod: oldPod, Record: rec}, "", 0, ErrUnexpectedMembership},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tt.o.PeerURL = url
			got, err := Next(tt.o)
			if tt.wantErr != nil {
				require.ErrorIs(t, err, tt.wantErr)
				assert.Contains(t, err.Error(), url, "the error names the member")
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tt.want, got.Action, got.Why)
			assert.Equal(t, tt.wantID, got.ID)
			assert.NotEmpty(t, got.Why)
		})
	}
}

// Walking the procedure from the start, applying each step as etcd and the controller would, ends at Verify
// with a new member ID, and never passes through a state Next refuses.
func TestTheProcedureEndsWithANewIDOnANewPod(t *testing.T) {
	o := Observed{PeerURL: url, Members: with(voter(0xb, "etcd-1", url)), Leader: 0xb, Pod: Pod{Exists: true, UID: "uid-old"}}
	var seen []Action
	for range 12 {
		s, err := Next(o)
		require.NoError(t, err, "after %v", seen)
		seen = append(seen, s.Action)
		switch s.Action {
		case MoveLeader:
			o.Leader = 0xa
		case Remove:
			o.Record = &Record{OldID: s.ID, OldPodUID: o.Pod.UID}
			o.Members = others()
		case LetPodGo:
			o.Pod = Pod{}
		case AwaitPod:
			o.Pod = Pod{Exists: true, UID: "uid-new", AtUpdateRevision: true}
		case AddLearner:
			o.Members = with(Member{ID: 0xd, PeerURLs: []string{url}, Learner: true})
			o.Record.LearnerID = 0xd
		case AwaitStart:
			o.Members = with(Member{ID: 0xd, Name: "etcd-1", PeerURLs: []string{url}, Learner: true})
		case Promote:
			o.Members = with(voter(0xd, "etcd-1", url))
		case Verify:
			assert.Equal(t, []Action{MoveLeader, Remove, LetPodGo, AwaitPod, AddLearner, AwaitStart, Promote, Verify}, seen)
			assert.NotEqual(t, uint64(0xb), s.ID)
			return
		}
	}
	t.Fatalf("no Verify after %v", seen)
}

// The record written before ReplaceAgain's remove names the promoted member as the old one, and the pod it is on
// now (if any) as the pod that must go before its learner is added (review 3, item 1).
func TestAgainRecordStartsTheProcedureOver(t *testing.T) {
	recPromoted := &Record{PeerURL: url, OldID: 0xb, OldPodUID: "uid-old", LearnerID: 0xd, LearnerPodUID: "uid-new"}
	recreated := Pod{Exists: true, UID: "uid-recreated", AtUpdateRevision: true}
	o := Observed{PeerURL: url, Members: with(voter(0xd, "etcd-1", url)), Leader: 0xa, Pod: recreated, Record: recPromoted}
	again := o.AgainRecord(0xd)
	assert.Equal(t, Record{PeerURL: url, OldID: 0xd, OldPodUID: "uid-recreated"}, again)

	o.Record = &again
	next, err := Next(o)
	require.NoError(t, err)
	assert.Equal(t, Remove, next.Action, "with the new record, the promoted member is the one to remove")
	o.Members = others()
	next, err = Next(o)
	require.NoError(t, err)
	assert.Equal(t, LetPodGo, next.Action, "the recreated pod runs under the removed ID: it goes before the learner is added")

	gone := Observed{PeerURL: url, Members: with(voter(0xd, "etcd-1", url)), Pod: Pod{}, Record: recPromoted}
	assert.Equal(t, Record{PeerURL: url, OldID: 0xd}, gone.AgainRecord(0xd), "no pod: the next one to exist is new")
}
