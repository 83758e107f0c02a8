package revert

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/etcd-rollout/pulumi-etcd-rollout/rollout/internal/gate"
	"github.com/etcd-rollout/pulumi-etcd-rollout/rollout/internal/planner"
	"github.com/etcd-rollout/pulumi-etcd-rollout/rollout/internal/planner/plannertest"
)

// world is a fake engine over three members: it answers looks with st, grants or refuses the gate's permits as
// the case says, and logs every permit and every write.
type world struct {
	st       planner.ClusterState
	moveTo   int
	refuse   map[gate.Kind]error
	log      []string
	cooldown bool
}

func (w *world) Look(context.Context) (planner.ClusterState, error) { return w.st, nil }

func (w *world) Lock(_ context.Context, replicas int) error {
	w.log = append(w.log, "lock")
	w.st.Partition = replicas
	return nil
}

func (w *world) PermitRevert(_ context.Context, _ planner.ClusterState, _ int, to string) (int, error) {
	if err := w.refuse[gate.Revert]; err != nil {
		return -1, err
	}
	w.log = append(w.log, "permit revert to "+to)
	return w.moveTo, nil
}

func (w *world) Permit(_ context.Context, kind gate.Kind, _ planner.ClusterState, step planner.Step) (gate.Permit, error) {
	if err := w.refuse[kind]; err != nil {
		return gate.Permit{}, err
	}
	w.log = append(w.log, "permit "+kind.String())
	return gate.Permit{Kind: kind, Ordinal: step.Ordinal, LeaseUntil: time.Now().Add(time.Minute)}, nil
}

func (w *world) MoveLeader(_ context.Context, _ gate.Permit, _ planner.ClusterState, step planner.Step) error {
	w.log = append(w.log, fmt.Sprintf("move leader %d → %d", step.From, step.To))
	return nil
}

func (w *world) Disrupting()   {}
func (w *world) Forget(string) {}

func (w *world) DeleteOnAFreshLook(_ context.Context, st planner.ClusterState, ordinal int, _ string) error {
	w.log = append(w.log, "delete "+st.Members[ordinal].Pod)
	return nil
}

func (w *world) WaitMember(_ context.Context, st planner.ClusterState, ordinal int, podRevision string, _ time.Time) error {
	w.log = append(w.log, fmt.Sprintf("wait %s at %s", st.Members[ordinal].Pod, podRevision))
	return nil
}

func (w *world) OneMemberBack(context.Context, planner.ClusterState, string, bool) {}
func (w *world) CooldownDue()                                                      { w.cooldown = true }
func (w *world) Say(planner.Step, string, ...any)                                  {}

// A revert deletes the failed member's pod only under the gate's Revert permit, moves the leader off it first
// when the gate says so under a MoveLeader permit of its own, and a refusal stops it before anything is
// written. The revival of a member down on an older revision (Recreate) asks the gate's Recreate sequence.
func TestARevertAsksTheGateBeforeItDeletesAPod(t *testing.T) {
	refused := &gate.Refusal{Kind: gate.Revert, Rule: gate.Quorum, Err: errors.New("the others would not keep a quorum")}
	failedLeads := func(w *world) { w.moveTo = 0; w.st.Members[2].IsLeader, w.st.Members[0].IsLeader = true, false }
	tests := []struct {
		name     string
		setup    func(w *world)
		recreate bool
		wantErr  error
		want     []string
	}{
		{name: "a failed follower", want: []string{"permit revert to " + plannertest.OldRev, "delete etcd-2", "wait etcd-2 at " + plannertest.OldRev}},
		{name: "a failed leader: the leader moves first", setup: failedLeads, want: []string{
			"permit revert to " + plannertest.OldRev, "permit move the leader", "move leader 2 → 0", "delete etcd-2", "wait etcd-2 at " + plannertest.OldRev}},
		{name: "the partition is locked first", setup: func(w *world) { w.st.Partition = 2 }, want: []string{
			"lock", "permit revert to " + plannertest.OldRev, "delete etcd-2", "wait etcd-2 at " + plannertest.OldRev}},
		{name: "a refused revert writes nothing", setup: func(w *world) { w.refuse = map[gate.Kind]error{gate.Revert: refused} }, wantErr: refused},
		{name: "a refused leader move deletes nothing", setup: func(w *world) {
			failedLeads(w)
			w.refuse = map[gate.Kind]error{gate.MoveLeader: refused}
		}, wantErr: refused, want: []string{"permit revert to " + plannertest.OldRev}},
		{name: "a member down on an older revision is brought back", recreate: true, want: []string{
			"permit recreate", "delete etcd-2", "wait etcd-2 at " + plannertest.OldRev}},
		{name: "a refused revival deletes nothing", recreate: true, setup: func(w *world) { w.refuse = map[gate.Kind]error{gate.Recreate: refused} }, wantErr: refused},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			w := &world{st: plannertest.HealthyState(3, 0, 2), moveTo: -1}
			if tt.setup != nil {
				tt.setup(w)
			}
			var err error
			if tt.recreate {
				err = Recreate(context.Background(), w, w.st, 2)
			} else {
				var to string
				to, err = Revert(context.Background(), w, 2)
				if err == nil {
					assert.Equal(t, plannertest.OldRev, to)
				}
			}
			if tt.wantErr != nil {
				require.ErrorIs(t, err, tt.wantErr)
			} else {
				require.NoError(t, err)
			}
			assert.Equal(t, tt.want, w.log)
			assert.Equal(t, tt.recreate && tt.wantErr == nil, w.cooldown, "a revival asks for the cool-down")
		})
	}
}
