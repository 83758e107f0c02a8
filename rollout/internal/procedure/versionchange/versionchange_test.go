package versionchange

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

// world is a fake engine: it grants or refuses the gate's PointOfNoReturn permit, answers etcd's downgrade
// calls as the case says, and logs every permit, call and Event.
type world struct {
	refuse    error
	enableErr error
	cancelErr error
	reportsOn bool
	log       []string
}

func (w *world) Permit(_ context.Context, kind gate.Kind, _ planner.ClusterState, _ planner.Step) (gate.Permit, error) {
	if w.refuse != nil {
		return gate.Permit{}, w.refuse
	}
	w.log = append(w.log, "permit "+kind.String())
	return gate.Permit{Kind: kind, Ordinal: -1, LeaseUntil: time.Now().Add(time.Minute)}, nil
}

func (w *world) Enabling(target string) { w.log = append(w.log, "enabling "+target) }

func (w *world) EnableDowngrade(_ context.Context, permit gate.Permit, _ planner.ClusterState, target string) (string, error) {
	w.log = append(w.log, fmt.Sprintf("enable %s under %s", target, permit.Kind))
	return "etcd-0", w.enableErr
}

func (w *world) CancelDowngrade(_ context.Context, _ planner.ClusterState, target string) (string, error) {
	w.log = append(w.log, "cancel "+target)
	return "etcd-0", w.cancelErr
}

func (w *world) ReportsDowngradeEnabled(context.Context, planner.ClusterState, string) bool {
	return w.reportsOn
}

func (w *world) AwaitDowngradeReady(_ context.Context, _ planner.ClusterState, step planner.Step) error {
	w.log = append(w.log, "await "+step.Version)
	return nil
}

func (w *world) VersionAfterCancel(context.Context, planner.ClusterState, string) (string, bool) {
	return "3.6.0", true
}

func (w *world) ConfirmLease(context.Context) error { return nil }
func (w *world) Record(_ context.Context, reason, _ string) {
	w.log = append(w.log, "event "+reason)
}
func (w *world) Say(planner.Step, string, ...any) {}

// etcd's downgrade is enabled only under the gate's PointOfNoReturn permit, and a refused permit enables
// nothing; a run's exit cancels a downgrade no member restarted on, and leaves one a member needs.
func TestADowngradeIsEnabledOnlyUnderThePointOfNoReturnPermit(t *testing.T) {
	refused := &gate.Refusal{Kind: gate.PointOfNoReturn, Rule: gate.Snapshot, Err: errors.New("no snapshot")}
	lost := errors.New("the answer was lost")
	enabledAlready := func(st *planner.ClusterState) { st.Members[1].DowngradeTarget = "3.5.0" }
	tests := []struct {
		name    string
		w       world
		state   func(st *planner.ClusterState)
		wantErr error
		want    []string
	}{
		{name: "enabled under the permit, then waited for", want: []string{
			"permit point of no return", "enabling 3.5", "enable 3.5 under point of no return", "event " + ReasonEnabled, "await 3.5"}},
		{name: "enabled by an earlier run: only waited for", state: enabledAlready, want: []string{"await 3.5"}},
		{name: "a refused permit enables nothing", w: world{refuse: refused}, wantErr: refused},
		{name: "a lost answer the members contradict", w: world{enableErr: lost, reportsOn: true}, want: []string{
			"permit point of no return", "enabling 3.5", "enable 3.5 under point of no return", "event " + ReasonEnabled, "await 3.5"}},
		{name: "a lost answer nobody contradicts", w: world{enableErr: lost}, wantErr: lost, want: []string{
			"permit point of no return", "enabling 3.5", "enable 3.5 under point of no return"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			st := plannertest.HealthyState(3, 0)
			if tt.state != nil {
				tt.state(&st)
			}
			err := Enable(context.Background(), &tt.w, st, planner.Step{Kind: planner.StepEnableDowngrade, Version: "3.5"})
			if tt.wantErr != nil {
				require.ErrorIs(t, err, tt.wantErr)
			} else {
				require.NoError(t, err)
			}
			assert.Equal(t, tt.want, tt.w.log)
		})
	}

	t.Run("a run's exit before any restart cancels it", func(t *testing.T) {
		w := &world{}
		said := Settle(context.Background(), w, plannertest.HealthyState(3, 0), "3.5", false)
		assert.Equal(t, []string{"cancel 3.5", "event " + ReasonCancelled}, w.log)
		assert.Contains(t, said, "was cancelled, since no member had restarted: the cluster version is back to 3.6.0")
	})
	t.Run("a run's exit after a restart leaves it on", func(t *testing.T) {
		w := &world{}
		said := Settle(context.Background(), w, plannertest.HealthyState(3, 0), "3.5", true)
		assert.Empty(t, w.log)
		assert.Contains(t, said, "stays enabled")
	})
}

// A downgrade an earlier run left on is cancelled when the template does not run its minor, and left alone
// when it does; etcd's "no job" is no failure.
func TestADowngradeLeftOnIsEndedWhenTheTemplateDoesNotWantIt(t *testing.T) {
	noJob := fmt.Errorf("%w: no downgrade job", ErrNoJob)
	tests := []struct {
		name     string
		template string
		w        world
		want     []string
		wantSeen string
	}{
		{name: "the template runs another minor", template: "registry.k8s.io/etcd:3.6.8-0",
			want: []string{"cancel 3.5.0", "event " + ReasonCancelled}, wantSeen: "3.6.0"},
		{name: "etcd ended the job already", template: "registry.k8s.io/etcd:3.6.8-0", w: world{cancelErr: noJob},
			want: []string{"cancel 3.5.0", "event " + ReasonCancelled}, wantSeen: "3.6.0"},
		{name: "the template runs the target", template: "registry.k8s.io/etcd:3.5.21-0"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			st := plannertest.HealthyState(3, 0)
			st.TemplateImage, st.Members[0].DowngradeTarget = tt.template, "3.5.0"
			seen, err := EndLeft(context.Background(), &tt.w, st)
			require.NoError(t, err)
			assert.Equal(t, tt.want, tt.w.log)
			assert.Equal(t, tt.wantSeen, seen)
		})
	}
}
