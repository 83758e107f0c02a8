package rollout

// How a run asks the gate (internal/gate, judged in gatechecks.go) before each step that disrupts a member,
// and how it drives the procedures below the engine (internal/procedure/...): each decides its steps and asks
// through the small interface it declares, which the adapters here implement over the run: its looks, its
// gate, its lease and its writes.

import (
	"context"
	"errors"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/etcd-rollout/pulumi-etcd-rollout/rollout/internal/gate"
	"github.com/etcd-rollout/pulumi-etcd-rollout/rollout/internal/member"
	"github.com/etcd-rollout/pulumi-etcd-rollout/rollout/internal/outage"
	"github.com/etcd-rollout/pulumi-etcd-rollout/rollout/internal/procedure/replacement"
	"github.com/etcd-rollout/pulumi-etcd-rollout/rollout/internal/procedure/restart"
	"github.com/etcd-rollout/pulumi-etcd-rollout/rollout/internal/procedure/versionchange"
	"github.com/etcd-rollout/pulumi-etcd-rollout/rollout/internal/replace"
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

// startPermit runs the gate's Start sequence over the run's plan: the planner's word, the version path
// before the first disruption, consents, the controller acting on the first step, and trust ahead.
func (r *run) startPermit(ctx context.Context, st ClusterState, plan *Plan, planErr error) error {
	_, err := r.permit(ctx, gate.Start, st, Step{}, -1, &gateChecks{plan: plan, planErr: planErr})
	return err
}

// runSteps are the steps every procedure's engine takes the same way: a fresh look, the gate's Restart or
// RemoveMember sequence, the partition's writes and waits, the lease, and the lines and events a person reads.
type runSteps struct{ r *run }

func (p runSteps) Look(ctx context.Context) (ClusterState, error) { return p.r.observe(ctx) }
func (p runSteps) ConfirmLease(ctx context.Context) error         { return p.r.e.lease.Confirm(ctx) }
func (p runSteps) Lock(ctx context.Context, replicas int) error   { return p.r.lock(ctx, replicas) }
func (p runSteps) Forget(pod string)                              { p.r.e.etcd.Forget(pod) }
func (p runSteps) Say(step Step, format string, args ...any)      { p.r.e.emit(step, format, args...) }

func (p runSteps) ClearToDisrupt(ctx context.Context, st ClusterState, step Step) (gate.Permit, bool, error) {
	return p.r.clearToDisrupt(ctx, st, step)
}

func (p runSteps) LowerPartition(ctx context.Context, permit gate.Permit, ordinal int) error {
	gen, err := p.r.e.sts.LowerPartition(ctx, permit, ordinal, p.r.gen)
	if err == nil {
		p.r.gen = gen
	}
	return err
}

func (p runSteps) WaitPodRecreated(ctx context.Context, st ClusterState, ordinal int, since time.Time) error {
	return p.r.e.waitPodRecreated(ctx, st, ordinal, expectedSpec{Partition: ordinal, Generation: p.r.gen}, since)
}

func (p runSteps) PartitionLowered(ordinal int, pod, message string) {
	p.r.e.announce(Event{Kind: EventPartitionLowered, Step: Step{Kind: StepWaitMember, Ordinal: ordinal}, Pod: pod}, "%s", message)
}

func (p runSteps) Recreated(ordinal int, pod, message string) {
	p.r.e.announce(Event{Kind: EventMemberRecreated, Step: Step{Kind: StepWaitMember, Ordinal: ordinal}, Pod: pod}, "%s", message)
}

// replaceMember replaces a member whose data dies with its pod (internal/procedure/replacement).
func (r *run) replaceMember(ctx context.Context, st ClusterState, step Step) error {
	set := replacement.Settings{Timeout: r.e.cfg.ReadyTimeout + r.e.cfg.HealthTimeout, PollEvery: r.e.pollEvery, CallTimeout: memberCallTimeout}
	return replacement.Run(ctx, &replacing{runSteps: runSteps{r}}, st, step, set)
}

// replacing is a run as a replacement's engine.
type replacing struct {
	runSteps
	// release is the gate's checks of the last ReleaseData permit: a delete with the partition locked keeps
	// its rule (every member the release watched stays up) on the fresh look right before it.
	release *gateChecks
}

func (p *replacing) SameTemplate(st ClusterState) error { return p.r.checkSameTemplate(st) }

func (p *replacing) Permit(ctx context.Context, kind gate.Kind, st ClusterState, step Step) (gate.Permit, error) {
	return p.r.permit(ctx, kind, st, step, step.Ordinal, nil)
}

func (p *replacing) PermitRelease(ctx context.Context, st ClusterState, step Step, lowering bool) (gate.Permit, error) {
	p.release = &gateChecks{lowering: lowering}
	return p.r.permit(ctx, gate.ReleaseData, st, step, step.Ordinal, p.release)
}

func (p *replacing) Disrupting()                  { p.r.touched, p.r.disrupted = true, true }
func (p *replacing) Etcd() replacement.Membership { return p.r.e.etcd }

func (p *replacing) DeleteReleased(ctx context.Context, st ClusterState, ordinal int) error {
	if p.release == nil {
		return fmt.Errorf("deleting %s's pod: the gate was not asked to release it", st.Members[ordinal].Pod)
	}
	return p.r.deleteOnAFreshLook(ctx, st, ordinal, p.release.othersStillUp(ctx), "")
}

func (p *replacing) WaitVoter(ctx context.Context, st ClusterState, ordinal int, podRevision string, since time.Time) (func(context.Context), error) {
	want := expectedSpec{Partition: st.Replicas, Generation: p.r.gen, PodRevision: podRevision, FullWindow: true}
	pass, err := p.r.e.waitMember(ctx, st, ordinal, want, since)
	if err != nil {
		return nil, err
	}
	return func(ctx context.Context) { p.r.reportRolled(ctx, st, ordinal, pass, false, since) }, nil
}

func (p *replacing) SaveRecord(ctx context.Context, ordinal int, rec replace.Record) error {
	return p.r.e.records.Save(ctx, ordinal, rec)
}

func (p *replacing) DeleteRecord(ctx context.Context, ordinal int) error {
	return p.r.e.records.Delete(ctx, ordinal)
}

func (p *replacing) MemberID(ordinal int) uint64        { return p.r.memberIDs[ordinal] }
func (p *replacing) SetMemberID(ordinal int, id uint64) { p.r.memberIDs[ordinal] = id }

func (p *replacing) Replacing(step Step, pod, message string) {
	p.r.e.announce(Event{Kind: EventMemberRestarting, Step: step, Pod: pod}, "%s", message)
}

// reverting is a run as a revert's engine (internal/procedure/revert).
type reverting struct{ runSteps }

func (p *reverting) PermitRevert(ctx context.Context, st ClusterState, ordinal int, to string) (int, error) {
	g := &gateChecks{revertTo: to}
	if _, err := p.r.permit(ctx, gate.Revert, st, Step{Kind: StepRecreate, Ordinal: ordinal}, ordinal, g); err != nil {
		return -1, err
	}
	return g.moveLeaderTo, nil
}

func (p *reverting) Permit(ctx context.Context, kind gate.Kind, st ClusterState, step Step) (gate.Permit, error) {
	ordinal := step.Ordinal
	if step.Kind == StepTransferLeader {
		ordinal = step.From // the member the leader moves off
	}
	return p.r.permit(ctx, kind, st, step, ordinal, nil)
}

func (p *reverting) MoveLeader(ctx context.Context, permit gate.Permit, st ClusterState, step Step) error {
	return p.r.moveLeader(ctx, permit, st, step)
}

func (p *reverting) Disrupting() { p.r.disrupted = true }

func (p *reverting) DeleteOnAFreshLook(ctx context.Context, st ClusterState, ordinal int, watchBefore string) error {
	return p.r.deleteOnAFreshLook(ctx, st, ordinal, anotherFailedMemberDown, watchBefore)
}

func (p *reverting) WaitMember(ctx context.Context, st ClusterState, ordinal int, podRevision string, since time.Time) error {
	want := expectedSpec{Partition: st.Replicas, Generation: p.r.gen, PodRevision: podRevision}
	_, err := p.r.e.waitMember(ctx, st, ordinal, want, since)
	return err
}

func (p *reverting) OneMemberBack(ctx context.Context, st ClusterState, pod string, passed bool) {
	p.r.addOwnElections(ctx, pod, maxTerm(st), passed)
}

func (p *reverting) CooldownDue() { p.r.cooldownDue = true }

// restarting is a run as a restart's engine (internal/procedure/restart).
type restarting struct{ runSteps }

func (p *restarting) MeterOutage(ctx context.Context, st ClusterState, ordinal int) (restart.Outage, error) {
	meter, err := p.r.meterOutage(ctx, st, ordinal)
	if err != nil || meter == nil {
		return nil, err
	}
	meter.Down()
	return &restartOutage{r: p.r, meter: meter, pod: st.Members[ordinal].Pod, termBefore: maxTerm(st)}, nil
}

func (p *restarting) Disrupting(st ClusterState, ordinal int) {
	r := p.r
	r.touched, r.disrupted = true, true
	if r.downgrade != nil {
		r.downgrade.restarted = true
	}
	r.rolledFrom[ordinal] = st.Members[ordinal].Image
}

func (p *restarting) DeleteOnAFreshLook(ctx context.Context, st ClusterState, ordinal int) error {
	return p.r.deleteOnAFreshLook(ctx, st, ordinal, nil, "")
}

func (p *restarting) WaitRestarted(ctx context.Context, st ClusterState, ordinal int, since time.Time) error {
	oneLook := p.r.e.proven.Has(st.UpdateRevision)
	return p.r.gateRestarted(ctx, st, ordinal, expectedSpec{Partition: st.Replicas, Generation: p.r.gen}, oneLook, since)
}

func (p *restarting) Restarting(step Step, pod, message string) {
	p.r.e.announce(Event{Kind: EventMemberRestarting, Step: step, Pod: pod}, "%s", message)
}

// restartOutage is the run's meter of a one-member restart's write outage, as the restart procedure ends it.
type restartOutage struct {
	r          *run
	meter      *outage.Meter
	pod        string
	termBefore uint64
}

func (o *restartOutage) Watch(ctx context.Context) { o.meter.Watch(ctx) }

func (o *restartOutage) End(ctx context.Context, passed bool) {
	o.r.endOutage(ctx, o.meter, o.pod, o.termBefore, passed)
}

// changingVersion is a run as the version change's engine (internal/procedure/versionchange).
type changingVersion struct{ runSteps }

func (p *changingVersion) Permit(ctx context.Context, kind gate.Kind, st ClusterState, step Step) (gate.Permit, error) {
	return p.r.permit(ctx, kind, st, step, -1, nil)
}

func (p *changingVersion) Enabling(target string) { p.r.downgrade = &downgradeRun{target: target} }

func (p *changingVersion) EnableDowngrade(ctx context.Context, permit gate.Permit, st ClusterState, target string) (string, error) {
	pctx, cancel := permit.Within(ctx)
	defer cancel()
	return p.r.e.downgradeCall(pctx, st, member.DowngradeEnable, target)
}

func (p *changingVersion) CancelDowngrade(ctx context.Context, st ClusterState, target string) (string, error) {
	pod, err := p.r.e.downgradeCall(ctx, st, member.DowngradeCancel, target)
	if errors.Is(err, member.ErrNoDowngradeJob) {
		err = fmt.Errorf("%w: %w", versionchange.ErrNoJob, err)
	}
	return pod, err
}

func (p *changingVersion) ReportsDowngradeEnabled(ctx context.Context, st ClusterState, target string) bool {
	return p.r.e.reportsDowngradeEnabled(ctx, st, target)
}

func (p *changingVersion) AwaitDowngradeReady(ctx context.Context, st ClusterState, step Step) error {
	return p.r.e.awaitDowngradeReady(ctx, st, step)
}

func (p *changingVersion) VersionAfterCancel(ctx context.Context, st ClusterState, target string) (string, bool) {
	return p.r.e.versionAfterCancel(ctx, st, target)
}

func (p *changingVersion) Record(ctx context.Context, reason, message string) {
	p.r.e.record(ctx, p.r.uid, corev1.EventTypeNormal, reason, message)
}
