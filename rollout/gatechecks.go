package rollout

// The engine's side of the gate (internal/gate): the one file that judges the rules of the refusal sequence.
// A procedure never calls a check itself: it asks the gate (run.permit, GatePreview, GatePreflight), which
// runs the sequence of the step's kind and answers with a permit or a refusal. A test
// (TestOnlyTheGateCallsTheChecks) keeps every check's call in this file.

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/etcd-rollout/pulumi-etcd-rollout/rollout/internal/gate"
	"github.com/etcd-rollout/pulumi-etcd-rollout/rollout/internal/planner"
	"github.com/etcd-rollout/pulumi-etcd-rollout/rollout/internal/poll"
	"github.com/etcd-rollout/pulumi-etcd-rollout/rollout/internal/trustcheck"
)

// errLookAgain is the hold of a check that found live state moved under the step (the member leads again, a
// member that passed cannot be seen): the run looks again and plans anew.
var errLookAgain = errors.New("look again")

// LiveChecks is what a preview's gate asks a member: the engine in production, a fake in the provider's
// tests. Only the gate calls it.
type LiveChecks interface {
	// CheckTrust refuses restarting the members of ordinals onto the template's TLS material when their peers
	// or their clients, as they run now, would not talk to them (Engine.CheckTrust).
	CheckTrust(ctx context.Context, st ClusterState, ordinals []int) error
	// ValidateDowngrade asks etcd whether the cluster can go down to target (Engine.ValidateDowngrade).
	ValidateDowngrade(ctx context.Context, st ClusterState, target string) error
}

// gateChecks judges the rules for one question to the gate: what the question is about (st, the plan, the
// step) and who can answer (the engine, the run). It implements gate.Checks.
type gateChecks struct {
	e    *Engine
	r    *run // nil outside a run: a preview, `etcd-rollout plan`
	cfg  Config
	live LiveChecks
	st   ClusterState
	// plan and planErr are the planner's answer, for Preview and Start.
	plan    *Plan
	planErr error
	step    Step
	// onFreshLook is the procedure's own one-at-a-time rule on the look right before a pod delete (DeletePod);
	// watchBefore, when set, says what the delete is for, and has the members on the failed revision watched
	// staying up first.
	onFreshLook func(ClusterState, int) error
	watchBefore string
	// lowering says a ReleaseData step lowers the partition (rather than deleting the pod).
	lowering bool
	// revertTo is the revision a Revert brings the member back to.
	revertTo string
	// What a Preflight judges: the template's etcd container, every member's image and the members that enable
	// the v2 store, by pod name.
	template     *corev1.Container
	memberImages map[string]string
	v2Members    []string

	// What the checks found that the procedure uses once permitted.
	moveLeaderTo int      // Revert: the member the leader moves to first (-1: none)
	stillUp      stayedUp // ReleaseData: the members watched staying up, judged again on the fresh look
}

// Holds says err is a hold: waiting may cure it.
func (g *gateChecks) Holds(err error) bool {
	return errors.Is(err, errLookAgain) || (errors.Is(err, ErrBlocked) && !planner.WaitingCannotFix(err))
}

// LeaseUntil is the end of the time the run surely holds its lease, as last confirmed; zero outside a run.
func (g *gateChecks) LeaseUntil() time.Time {
	if g.e == nil || g.r == nil {
		return time.Time{}
	}
	return g.e.lease.SurelyUntil()
}

// Check judges rule for req.
func (g *gateChecks) Check(ctx context.Context, rule gate.Rule, req gate.Request) error {
	switch rule {
	case gate.Shape:
		return g.planErr
	case gate.Version:
		return g.version(ctx, req)
	case gate.Consent:
		return planner.CheckConsents(g.st, *g.plan, g.cfg.consents())
	case gate.Controller:
		return g.controller(ctx, req)
	case gate.LeaderOff:
		return g.leaderOff(ctx, req)
	case gate.OneAtATime:
		return g.oneAtATime(ctx, req)
	case gate.Trust:
		return g.trust(ctx, req)
	case gate.Quorum:
		return g.quorum(ctx, req)
	case gate.Snapshot:
		return g.snapshot()
	case gate.Lease:
		return g.lease(ctx, req)
	}
	return fmt.Errorf("internal: the gate asked the engine to judge %s, which it does not know", rule)
}

// version is the version path before a plan starts (the members' versions against the template's, the v2
// store, and etcd's own validation of a downgrade a preview shows), and at a point of no return the
// downgrade's validation or, for a member brought back, the cluster version it must still accept.
func (g *gateChecks) version(ctx context.Context, req gate.Request) error {
	switch req.Kind {
	case gate.Preflight:
		image := g.template.Image
		if err := planner.CheckImagePath(image, g.memberImages); err != nil {
			return err
		}
		if err := planner.CheckV2Store(image, g.v2Members); err != nil {
			return err
		}
		if to, ok := ImageVersion(image); ok {
			return planner.CheckContainerFlags(g.template, to)
		}
		return nil
	case gate.Preview, gate.Start:
		if g.planErr != nil || (g.r != nil && g.r.disrupted) || (len(g.plan.Roll) == 0 && len(g.plan.Wait) == 0) {
			return nil
		}
		if err := planner.CheckVersionPaths(g.st); err != nil {
			return err
		}
		if d := g.plan.Downgrade; req.Kind == gate.Preview && d != nil && !d.Enabled {
			// etcd's own word on the downgrade a preview shows: validate changes nothing.
			if err := g.live.ValidateDowngrade(ctx, g.st, d.Target); err != nil {
				return &DowngradeNotValidatedError{Err: err}
			}
			d.Validated = true
		}
		return nil
	case gate.PointOfNoReturn:
		if planner.DowngradeEnabledFor(g.st, g.step.Version) {
			return nil // an earlier run enabled it: nothing to cross
		}
		return g.e.ValidateDowngrade(ctx, g.st, g.step.Version)
	case gate.Revert:
		return g.revertVersion(ctx, req)
	case gate.Recreate:
		return g.e.checkPointOfNoReturn(ctx, g.st, req.Ordinal, g.e.comingBackImage(ctx, g.st, req.Ordinal))
	}
	return nil
}

// revertVersion says there is a revision to bring the failed member back to, and that etcd lets it rejoin on
// the version that revision runs (checkPointOfNoReturn).
func (g *gateChecks) revertVersion(ctx context.Context, req gate.Request) error {
	e, st := g.e, g.st
	if g.revertTo == "" || g.revertTo == st.UpdateRevision {
		// The last member's pod turned Ready (a container started: there is no readinessProbe, or it passed)
		// and the controller made the new revision current: a deleted pod would come back on it. Going back
		// means the previous template, by hand: say first when etcd would refuse the image it had.
		if before := g.r.rolledFrom[req.Ordinal]; before != "" {
			if err := e.checkPointOfNoReturn(ctx, st, req.Ordinal, before); err != nil {
				return err
			}
		}
		return fmt.Errorf("the StatefulSet controller already made %s its current revision (every pod was updated and Ready), so a recreated pod would run it again; revert by applying the previous pod template, which the next rollout rolls like any other", st.UpdateRevision)
	}
	return e.checkPointOfNoReturn(ctx, st, req.Ordinal, e.comingBackImage(ctx, st, req.Ordinal))
}

// controller says the StatefulSet controller will act on the plan's first step, and that lowering the
// partition for a member exposes no other member to a restart.
func (g *gateChecks) controller(ctx context.Context, req gate.Request) error {
	e := g.e
	switch req.Kind {
	case gate.Start:
		if len(g.plan.Steps) == 0 {
			return nil
		}
		return planner.ControllerWillAct(g.st, g.plan.Steps[0])
	case gate.Restart, gate.ReleaseData:
		if req.Kind == gate.ReleaseData {
			if !g.lowering {
				return nil
			}
			if err := g.othersStillUp(ctx)(g.st, req.Ordinal); err != nil {
				return fmt.Errorf("not letting %s's pod go: %w", req.Pod, err)
			}
		}
		if why := e.sts.OthersExposedBy(ctx, req.Ordinal, g.st.Replicas, g.st.UpdateRevision); why != "" {
			e.emit(g.step, "not lowering the partition to %d: %s, so the controller would restart it too; looking again", req.Ordinal, why)
			return holdAfter(ctx, e.pollEvery, "the partition lowered to %d would expose %s", req.Ordinal, why)
		}
	}
	return nil
}

// leaderOff says the member to stop does not lead; one that leads again is moved off first (a hold), up to
// maxStepRetries times.
func (g *gateChecks) leaderOff(ctx context.Context, req gate.Request) error {
	e, r, st := g.e, g.r, g.st
	isLeader, err := e.leaderIs(ctx, st, req.Ordinal)
	if err != nil {
		return fmt.Errorf("rolling %s: %w", req.Pod, err)
	}
	if !isLeader || st.Replicas == 1 { // a one-member etcd's only member always leads (its restart is consented)
		return nil
	}
	if r.retries++; r.retries > maxStepRetries {
		return fmt.Errorf("rolling %s: it became leader again %d times; stopping", req.Pod, r.retries)
	}
	e.emit(g.step, "%s leads again; planning a transfer first", req.Pod)
	return fmt.Errorf("%w: %s leads again", errLookAgain, req.Pod)
}

// oneAtATime says no member our writes disrupted is down: every member this run saw pass still answers from
// the process that passed, no other member a rollout rolled is down while a replacement removes or releases a
// member, and the procedure's own rule holds on the look right before a pod delete.
func (g *gateChecks) oneAtATime(ctx context.Context, req gate.Request) error {
	e, r, st := g.e, g.r, g.st
	switch req.Kind {
	case gate.DeletePod:
		return g.deleteOnAFreshLook(ctx, req)
	case gate.Revert:
		return anotherFailedMemberDown(st, req.Ordinal)
	case gate.RemoveMember:
		if down := planner.AnotherRolledMemberDown(st, req.Ordinal); down != nil {
			e.emit(g.step, "%s, on %s, is down (%s): %s stays a member until it is back", down.Pod, down.Revision, down.Problem, req.Pod)
			return holdAfter(ctx, e.pollEvery, "%s, on %s, is down (%s)", down.Pod, down.Revision, down.Problem)
		}
	}
	holding, err := r.lookAtPassed(ctx, true)
	switch {
	case err != nil:
		return err
	case holding && req.Kind == gate.ReleaseData:
		return fmt.Errorf("%w: a member that passed cannot be seen", errLookAgain)
	case holding:
		e.emit(g.step, "a member that passed cannot be seen right before %s restarts; looking again", req.Pod)
		return fmt.Errorf("%w: a member that passed cannot be seen", errLookAgain)
	case req.Kind != gate.ReleaseData:
		return nil
	}
	if down := planner.AnotherRolledMemberDown(st, req.Ordinal); down != nil {
		e.emit(g.step, "%s, on %s, is down (%s): %s's pod, with the removed member's data, stays until it is back", down.Pod, down.Revision, down.Problem, req.Pod)
		return fmt.Errorf("%w: %s is down", errLookAgain, down.Pod)
	}
	up, err := r.othersOnTheFailedRevisionStayUp(ctx, st, req.Ordinal, g.step, "letting "+req.Pod+"'s pod go")
	if err != nil {
		return fmt.Errorf("not letting %s's pod go: %w", req.Pod, err)
	}
	g.stillUp = up
	return nil
}

// deleteOnAFreshLook is a pod delete's one-at-a-time rule: the members on the failed revision watched staying up
// (when asked), then a fresh look, which the procedure's own rule judges, and the quorum rule after it.
func (g *gateChecks) deleteOnAFreshLook(ctx context.Context, req gate.Request) error {
	r, rule := g.r, g.onFreshLook
	if g.watchBefore != "" {
		up, err := r.othersOnTheFailedRevisionStayUp(ctx, g.st, req.Ordinal, g.step, g.watchBefore)
		if err != nil {
			return err
		}
		if rule == nil {
			rule = func(ClusterState, int) error { return nil }
		}
		rule = r.watchedStillUp(ctx, up, rule)
	}
	now, err := r.observe(ctx)
	if err != nil {
		return fmt.Errorf("observing right before deleting %s: %w", req.Pod, err)
	}
	g.st = r.provenInTheSameProcess(ctx, now, req.Ordinal)
	if rule == nil {
		return nil
	}
	return rule(g.st, req.Ordinal)
}

// othersStillUp is the rule a release's delete, or its partition lowering, keeps on its look: every member the
// release watched stays up in the process it stayed up in.
func (g *gateChecks) othersStillUp(ctx context.Context) func(ClusterState, int) error {
	return g.r.watchedStillUp(ctx, g.stillUp, func(ClusterState, int) error { return nil })
}

// trust says the member's peers and clients will talk to it once it restarts on the material it is to run.
func (g *gateChecks) trust(ctx context.Context, req gate.Request) error {
	switch req.Kind {
	case gate.Preview:
		if g.planErr != nil {
			return nil
		}
		return g.live.CheckTrust(ctx, g.st, g.plan.Roll)
	case gate.Start:
		if g.planErr != nil {
			return nil
		}
		return g.trustAhead(ctx)
	case gate.Revert:
		return g.revertTrust(ctx, req.Ordinal)
	}
	if err := g.e.checkTrust(ctx, g.st, []int{req.Ordinal}, g.r.trustProbes); err != nil {
		return fmt.Errorf("rolling %s: %w", req.Pod, err)
	}
	return nil
}

// trustAhead refuses, before the run acts, the restarts its plan leads to when the members' peers would
// refuse them: every member to roll before the first step (what the preview checks), and the next member
// before each leader move off it. Otherwise the refusal would come only right before the restart
// (clearToDisrupt, which still checks, since a Secret can change meanwhile), after a leader move made for a
// restart that will not happen: a write pause and a term for nothing (tests/faults' one-step swap, whenever
// the first member to restart led).
func (g *gateChecks) trustAhead(ctx context.Context) error {
	r, st, plan := g.r, g.st, *g.plan
	if !r.planned {
		return r.e.checkTrust(ctx, st, plan.Roll, r.trustProbes)
	}
	if len(plan.Steps) == 0 || plan.Steps[0].Kind != StepTransferLeader {
		return nil
	}
	if next, ok := plan.FirstDisruption(); ok {
		return r.e.checkTrust(ctx, st, []int{next.Ordinal}, r.trustProbes)
	}
	return nil
}

// revertTrust refuses a revert that would bring the member back with TLS material its peers or
// its clients refuse: a Secret is not part of a StatefulSet revision, so the pod the controller recreates at revision to
// mounts what the member failed with again, and fails again (issue 33, item 3). The run holds instead, with
// the partition locked, and names the objects to put trusted material back in. Without the revision's
// template (not allowed, or gone) nothing is said.
func (g *gateChecks) revertTrust(ctx context.Context, ordinal int) error {
	r, st, to := g.r, g.st, g.revertTo
	spec, err := r.e.sts.RevisionPodSpec(ctx, to)
	if err != nil {
		return nil
	}
	back := st
	back.PodTemplate = spec
	err = r.e.CheckTrust(ctx, back, []int{ordinal})
	if !isTrustRefusal(err) {
		return nil
	}
	c := EtcdContainer(spec.Containers)
	sources := trustcheck.Template{Spec: spec, Container: c, Flags: EtcdFlagValues(c)}.Sources()
	return fmt.Errorf("%s would come back on revision %s with the TLS material that is refused (%s: not part of a revision), so deleting its pod again cannot help; the partition is locked: put trusted material back there (or widen the trust first), then run again: %w",
		st.Members[ordinal].Pod, to, strings.Join(sources, ", "), err)
}

// quorum says the others keep a quorum of the voters without the member: on a fresh look right before a
// restart, a remove or a release, on the look a pod delete or a revert was decided on.
func (g *gateChecks) quorum(ctx context.Context, req gate.Request) error {
	e, r, st := g.e, g.r, g.st
	switch req.Kind {
	case gate.DeletePod:
		if err := podDeleteSafety(st, req.Ordinal, e.cfg.AcceptWriteOutage); err != nil {
			return fmt.Errorf("not deleting pod %s/%s: %w", e.cfg.Namespace, req.Pod, err)
		}
		return nil
	case gate.Revert:
		if m := st.Members[req.Ordinal]; !m.PodExists || m.Revision == g.revertTo {
			g.moveLeaderTo = -1
			return nil // nothing to delete
		}
		moveTo, err := revertSafety(st, req.Ordinal, e.cfg.AcceptWriteOutage)
		g.moveLeaderTo = moveTo
		return err
	}
	err := r.quorumOnAFreshLook(ctx, req.Ordinal)
	if err == nil || !errors.Is(err, ErrBlocked) {
		return err
	}
	if req.Kind == gate.ReleaseData {
		e.emit(g.step, "%v: %s's pod, with the removed member's data, stays until they do", err, req.Pod)
		return fmt.Errorf("%w: %w", errLookAgain, err)
	}
	e.emit(g.step, "%v, on a look right before disrupting it; looking again", err)
	// A member flapping between the two looks must not make this a busy loop.
	return holdAfter(ctx, e.pollEvery, "%v", err)
}

// snapshot says the snapshot the plan asks for before its point of no return is stored and verified, or that
// the user said to go on without one (snapshotFirst takes it before the run's first step).
func (g *gateChecks) snapshot() error {
	r := g.r
	if r.plan.Snapshot == nil || r.res.Snapshot != nil || r.res.SnapshotSkipped != "" || r.disrupted {
		return nil
	}
	return fmt.Errorf("internal: %w: the plan asks for one before %s and none was taken", ErrNoSnapshot, g.st.Members[r.plan.Snapshot.Before].Pod)
}

// lease confirms the run still holds its lease, saying which step it would not make without it.
func (g *gateChecks) lease(ctx context.Context, req gate.Request) error {
	err := g.e.lease.Confirm(ctx)
	if err == nil {
		return nil
	}
	switch req.Kind {
	case gate.Restart:
		return fmt.Errorf("rolling %s: not lowering the partition: %w", req.Pod, err)
	case gate.RemoveMember:
		return fmt.Errorf("not removing %s's member: %w", req.Pod, err)
	case gate.ReleaseData:
		return fmt.Errorf("not letting %s's pod go: %w", req.Pod, err)
	case gate.DeletePod:
		return fmt.Errorf("not deleting pod %s/%s: %w", g.e.cfg.Namespace, req.Pod, err)
	case gate.PointOfNoReturn:
		return fmt.Errorf("not enabling etcd's downgrade to %s: %w", g.step.Version, err)
	}
	return err
}

// holdAfter is a hold that has waited a poll interval first, so that a run that looks again at once does not
// spin while a member flaps; a cancelled wait is no hold.
func holdAfter(ctx context.Context, pollEvery time.Duration, format string, args ...any) error {
	if err := poll.Sleep(ctx, pollEvery); err != nil {
		return err
	}
	return fmt.Errorf("%w: %s", errLookAgain, fmt.Sprintf(format, args...))
}

// GatePreview runs the gate's Preview sequence over a plan made from st, which planErr is the planner's word
// on: the version path (and etcd's validation of a downgrade, which marks plan's Downgrade validated),
// consents, and the trust of every member to roll. It is what `pulumi preview` and `etcd-rollout plan` show
// before anything is touched; live answers what needs a member.
func GatePreview(ctx context.Context, live LiveChecks, cfg Config, st ClusterState, plan *Plan, planErr error) error {
	g := &gateChecks{live: live, cfg: cfg, st: st, plan: plan, planErr: planErr}
	_, err := gate.Check(ctx, g, gate.Request{Kind: gate.Preview, Ordinal: -1})
	return err
}

// GatePreflight runs the gate's Preflight sequence on what the provider reads before any member is contacted:
// the template's etcd container c, its image against every member's (memberImages, by pod name), the members
// that enable the v2 store (by pod name), and c's flags against the version its image's tag names (a
// *FlagsError).
func GatePreflight(c *corev1.Container, memberImages map[string]string, v2Members []string) error {
	g := &gateChecks{template: c, memberImages: memberImages, v2Members: v2Members}
	_, err := gate.Check(context.Background(), g, gate.Request{Kind: gate.Preflight, Ordinal: -1})
	return err
}

// refusedBy says which rule refused (0 when err is no refusal of the gate's).
func refusedBy(err error) gate.Rule {
	var refusal *gate.Refusal
	if errors.As(err, &refusal) {
		return refusal.Rule
	}
	return 0
}
