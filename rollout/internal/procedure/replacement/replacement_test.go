package replacement

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/etcd-rollout/pulumi-etcd-rollout/rollout/internal/gate"
	"github.com/etcd-rollout/pulumi-etcd-rollout/rollout/internal/memberlist"
	"github.com/etcd-rollout/pulumi-etcd-rollout/rollout/internal/planner"
	"github.com/etcd-rollout/pulumi-etcd-rollout/rollout/internal/replace"
)

const peerURL = "https://etcd-2.etcd:2380"

// world is a fake engine over three members, etcd-2's data dying with its pod: it answers looks from its own
// state, grants or refuses the gate's permits as the case says, and logs every permit and every write.
type world struct {
	members  []memberlist.Member
	leader   uint64
	podUID   string
	podRev   string
	records  map[int]replace.Record
	ids      map[int]uint64
	clear    bool  // ClearToDisrupt's answer
	refuse   error // Permit's refusal of a membership change
	log      []string
	reported int
}

func newWorld() *world {
	return &world{
		members: []memberlist.Member{{ID: 100, Name: "etcd-0"}, {ID: 101, Name: "etcd-1"}, {ID: 102, Name: "etcd-2", PeerURLs: []string{peerURL}}},
		leader:  100, podUID: "old", podRev: "old", records: map[int]replace.Record{}, ids: map[int]uint64{}, clear: true,
	}
}

func (w *world) Look(context.Context) (planner.ClusterState, error) {
	st := planner.ClusterState{Replicas: 3, Partition: 3, UpdateRevision: "new", CurrentRevision: "old", MembershipKnown: true,
		Membership: append([]memberlist.Member(nil), w.members...), Replacing: map[int]replace.Record{}}
	for i := range 3 {
		m := planner.MemberState{Ordinal: i, Pod: fmt.Sprintf("etcd-%d", i), PodExists: true, PodUID: fmt.Sprintf("pod-%d", i),
			Revision: "old", Reachable: true, Healthy: true, MemberID: uint64(100 + i), IsLeader: uint64(100+i) == w.leader, AppliedIndex: 50}
		if i == 2 {
			m.PodUID, m.Revision, m.MemberID = w.podUID, w.podRev, w.ids[2]
			m.IsLeader = w.leader == 102
		}
		st.Members = append(st.Members, m)
	}
	for i, m := range st.Membership {
		if m.IsLearner && w.podUID == "new" {
			st.Membership[i].Name = "etcd-2" // the new pod's etcd started it
		}
	}
	for o, rec := range w.records {
		st.Replacing[o] = rec
	}
	return st, nil
}

func (w *world) SameTemplate(planner.ClusterState) error { return nil }

func (w *world) ClearToDisrupt(_ context.Context, _ planner.ClusterState, step planner.Step) (gate.Permit, bool, error) {
	if !w.clear {
		return gate.Permit{}, false, nil
	}
	w.log = append(w.log, "permit remove-member")
	return gate.Permit{Kind: gate.RemoveMember, Ordinal: step.Ordinal, LeaseUntil: time.Now().Add(time.Minute)}, true, nil
}

func (w *world) Permit(_ context.Context, kind gate.Kind, _ planner.ClusterState, step planner.Step) (gate.Permit, error) {
	if w.refuse != nil {
		return gate.Permit{}, w.refuse
	}
	w.log = append(w.log, "permit "+kind.String())
	return gate.Permit{Kind: kind, Ordinal: step.Ordinal, LeaseUntil: time.Now().Add(time.Minute)}, nil
}

func (w *world) PermitRelease(_ context.Context, _ planner.ClusterState, step planner.Step, lowering bool) (gate.Permit, error) {
	w.log = append(w.log, fmt.Sprintf("permit release-data (lowering %t)", lowering))
	return gate.Permit{Kind: gate.ReleaseData, Ordinal: step.Ordinal, LeaseUntil: time.Now().Add(time.Minute)}, nil
}

func (w *world) Disrupting()                        {}
func (w *world) ConfirmLease(context.Context) error { return nil }
func (w *world) Etcd() Membership                   { return w }

func (w *world) MemberRemove(_ context.Context, _ string, id uint64) error {
	w.log = append(w.log, fmt.Sprintf("remove %x", id))
	for i, m := range w.members {
		if m.ID == id {
			w.members = append(w.members[:i:i], w.members[i+1:]...)
		}
	}
	return nil
}

func (w *world) MemberAddAsLearner(_ context.Context, _, url string) (memberlist.Member, error) {
	w.log = append(w.log, "add learner")
	added := memberlist.Member{ID: 200, IsLearner: true, PeerURLs: []string{url}}
	w.members = append(w.members, added)
	w.ids[2] = 200
	return added, nil
}

func (w *world) MemberPromote(_ context.Context, _ string, id uint64) error {
	w.log = append(w.log, fmt.Sprintf("promote %x", id))
	w.members[len(w.members)-1].IsLearner = false
	return nil
}

func (w *world) Forget(string) {}

func (w *world) DeleteReleased(context.Context, planner.ClusterState, int) error {
	w.log = append(w.log, "delete pod")
	w.podUID = "new"
	return nil
}

func (w *world) LowerPartition(context.Context, gate.Permit, int) error {
	w.log = append(w.log, "lower partition")
	return nil
}

func (w *world) WaitPodRecreated(context.Context, planner.ClusterState, int, time.Time) error {
	w.podUID, w.podRev = "new", "new"
	return nil
}

func (w *world) Lock(context.Context, int) error {
	w.log = append(w.log, "lock")
	return nil
}

func (w *world) WaitVoter(context.Context, planner.ClusterState, int, string, time.Time) (func(context.Context), error) {
	return func(context.Context) { w.reported++ }, nil
}

func (w *world) SaveRecord(_ context.Context, ordinal int, rec replace.Record) error {
	w.records[ordinal] = rec
	return nil
}

func (w *world) DeleteRecord(_ context.Context, ordinal int) error {
	delete(w.records, ordinal)
	return nil
}

func (w *world) MemberID(ordinal int) uint64            { return w.ids[ordinal] }
func (w *world) SetMemberID(ordinal int, id uint64)     { w.ids[ordinal] = id }
func (w *world) Replacing(planner.Step, string, string) {}
func (w *world) PartitionLowered(int, string, string)   {}
func (w *world) Recreated(int, string, string)          {}
func (w *world) Say(planner.Step, string, ...any)       {}

// The replacement asks the gate before every step that takes the member down or changes etcd's membership,
// and goes no further than the gate lets it: a hold makes a new plan, a refusal stops it.
func TestAReplacementAsksTheGateBeforeEveryDisruption(t *testing.T) {
	refused := &gate.Refusal{Kind: gate.ChangeMembership, Rule: gate.Lease, Err: errors.New("lease lost")}
	tests := []struct {
		name    string
		setup   func(w *world)
		wantErr error
		want    []string
		rolled  int
	}{
		{name: "the whole replacement", want: []string{
			"permit remove-member", "remove 66", "permit release-data (lowering true)", "lower partition", "lock",
			"permit change membership", "add learner", "permit change membership", "promote c8"}, rolled: 1},
		{name: "a hold before the remove makes a new plan", setup: func(w *world) { w.clear = false }},
		{name: "the member leads: the leader moves first, in a new plan", setup: func(w *world) { w.leader = 102 }},
		{name: "a refused membership change stops the replacement", setup: func(w *world) {
			w.members, w.podUID, w.podRev, w.refuse = w.members[:2], "new", "new", refused
			w.records[2] = replace.Record{PeerURL: peerURL, OldID: 102, OldPodUID: "old"}
		}, wantErr: refused},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			w := newWorld()
			if tt.setup != nil {
				tt.setup(w)
			}
			st, err := w.Look(context.Background())
			require.NoError(t, err)
			w.ids[2] = st.Members[2].MemberID
			if w.ids[2] == 0 {
				w.ids[2] = 102
			}
			err = Run(context.Background(), w, st, planner.Step{Kind: planner.StepReplace, Ordinal: 2}, Settings{Timeout: 5 * time.Second, PollEvery: time.Millisecond, CallTimeout: time.Second})
			if tt.wantErr != nil {
				require.ErrorIs(t, err, tt.wantErr)
			} else {
				require.NoError(t, err)
			}
			assert.Equal(t, tt.want, w.log)
			assert.Equal(t, tt.rolled, w.reported, "reported rolled")
		})
	}
}
