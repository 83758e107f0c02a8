package restart

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

// world is a fake engine: it grants, holds or refuses the gate's Restart permit as the case says, fails the
// member's gates when told to, and logs every permit, write and wait.
type world struct {
	hold     bool
	refuse   error
	failGate error
	metered  bool
	log      []string
}

func (w *world) ClearToDisrupt(_ context.Context, _ planner.ClusterState, step planner.Step) (gate.Permit, bool, error) {
	switch {
	case w.refuse != nil:
		return gate.Permit{}, false, w.refuse
	case w.hold:
		return gate.Permit{}, false, nil
	}
	w.log = append(w.log, "permit restart")
	return gate.Permit{Kind: gate.Restart, Ordinal: step.Ordinal, LeaseUntil: time.Now().Add(time.Minute)}, true, nil
}

func (w *world) MeterOutage(context.Context, planner.ClusterState, int) (Outage, error) {
	if !w.metered {
		return nil, nil
	}
	w.log = append(w.log, "outage measured")
	return w, nil
}

func (w *world) Watch(context.Context) { w.log = append(w.log, "outage watched") }
func (w *world) End(_ context.Context, passed bool) {
	w.log = append(w.log, fmt.Sprintf("outage ended (passed %t)", passed))
}

func (w *world) Disrupting(planner.ClusterState, int) {}
func (w *world) Forget(string)                        {}

func (w *world) LowerPartition(_ context.Context, permit gate.Permit, ordinal int) error {
	w.log = append(w.log, fmt.Sprintf("lower partition to %d under %s", ordinal, permit.Kind))
	return nil
}

func (w *world) WaitPodRecreated(context.Context, planner.ClusterState, int, time.Time) error {
	w.log = append(w.log, "pod recreated")
	return nil
}

func (w *world) Lock(context.Context, int) error {
	w.log = append(w.log, "lock")
	return nil
}

func (w *world) DeleteOnAFreshLook(_ context.Context, st planner.ClusterState, ordinal int) error {
	w.log = append(w.log, "delete "+st.Members[ordinal].Pod)
	return nil
}

func (w *world) WaitRestarted(_ context.Context, st planner.ClusterState, ordinal int, _ time.Time) error {
	w.log = append(w.log, "gates of "+st.Members[ordinal].Pod)
	return w.failGate
}

func (w *world) Restarting(planner.Step, string, string) {}
func (w *world) PartitionLowered(int, string, string)    {}
func (w *world) Recreated(int, string, string)           {}
func (w *world) Say(planner.Step, string, ...any)        {}

// A restart lowers the partition only under the gate's Restart permit for that member, locks it again as soon
// as the pod is recreated, then waits for the member's gates; a hold and a refusal write nothing.
func TestARestartLowersThePartitionOnlyUnderTheGatesPermit(t *testing.T) {
	refused := &gate.Refusal{Kind: gate.Restart, Rule: gate.Quorum, Err: errors.New("the others would not keep a quorum")}
	crashLoop := errors.New("etcd-2 did not pass the etcd gate")
	roll := []string{"permit restart", "lower partition to 2 under restart", "pod recreated", "lock", "gates of etcd-2"}
	tests := []struct {
		name        string
		w           world
		step        planner.Step
		wantCleared bool
		wantErr     error
		want        []string
	}{
		{name: "a restart", wantCleared: true, want: roll},
		{name: "a hold makes a new plan", w: world{hold: true}},
		{name: "a refusal writes nothing", w: world{refuse: refused}, wantErr: refused},
		{name: "a member already down is deleted too", step: planner.Step{AlreadyDown: true}, wantCleared: true,
			want: []string{"permit restart", "lower partition to 2 under restart", "delete etcd-2", "pod recreated", "lock", "gates of etcd-2"}},
		{name: "a member that fails its gates", w: world{failGate: crashLoop}, wantCleared: true, wantErr: crashLoop, want: roll},
		{name: "the only member: its write outage is measured", w: world{metered: true}, wantCleared: true, want: []string{
			"permit restart", "outage measured", "lower partition to 2 under restart", "pod recreated", "outage watched", "lock",
			"gates of etcd-2", "outage ended (passed true)"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			step := tt.step
			step.Kind, step.Ordinal = planner.StepLowerPartition, 2
			cleared, err := Restart(context.Background(), &tt.w, plannertest.HealthyState(3, 0), step)
			if tt.wantErr != nil {
				require.ErrorIs(t, err, tt.wantErr)
			} else {
				require.NoError(t, err)
			}
			assert.Equal(t, tt.wantCleared, cleared)
			assert.Equal(t, tt.want, tt.w.log)
		})
	}
}
