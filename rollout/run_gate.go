package rollout

// How a run asks the gate (internal/gate, gatechecks.go) before each step that disrupts a member.

import (
	"context"
	"errors"

	"github.com/etcd-rollout/pulumi-etcd-rollout/rollout/internal/gate"
)

// permit asks the gate whether the step of kind may disrupt its member, judged on st; g carries what the
// kind needs besides (nil: nothing). The permit is recorded for the run's tests (Engine.permitted).
func (r *run) permit(ctx context.Context, kind gate.Kind, st ClusterState, step Step, ordinal int, g *gateChecks) (gate.Permit, error) {
	if g == nil {
		g = &gateChecks{}
	}
	g.e, g.r, g.cfg, g.st, g.step = r.e, r, r.e.cfg, st, step
	pod := ""
	if ordinal >= 0 && ordinal < len(st.Members) {
		pod = st.Members[ordinal].Pod
	}
	p, err := gate.Check(ctx, g, gate.Request{Kind: kind, Ordinal: ordinal, Pod: pod})
	if err == nil && r.e.permitted != nil {
		r.e.permitted(p)
	}
	return p, err
}

// refusedBy says which rule refused (0 when err is no refusal of the gate's).
func refusedBy(err error) gate.Rule {
	var refusal *gate.Refusal
	if errors.As(err, &refusal) {
		return refusal.Rule
	}
	return 0
}

// startPermit runs the gate's Start sequence over the run's plan: the planner's word, the version path
// before the first disruption, consents, the controller acting on the first step, and trust ahead.
func (r *run) startPermit(ctx context.Context, st ClusterState, plan *Plan, planErr error) error {
	_, err := r.permit(ctx, gate.Start, st, Step{}, -1, &gateChecks{plan: plan, planErr: planErr})
	return err
}
