package rollout

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/etcd-rollout/pulumi-etcd-rollout/rollout/internal/health"
	"github.com/etcd-rollout/pulumi-etcd-rollout/rollout/internal/planner"
	"github.com/etcd-rollout/pulumi-etcd-rollout/rollout/internal/poll"
)

// ErrMemberUnseen is wrapped when the engine could not reach a member for a whole health timeout (no
// port-forward to it could be opened, or each ended under the look): one that had passed its gates, or one
// whose etcd gate ended on such a look. It is not the member's failure, so nothing is reverted or deleted:
// the run stops with the partition locked rather than restart another member without knowing this one is up.
var ErrMemberUnseen = errors.New("could not look at a member")

// passedMember is a member this run saw pass its gates.
type passedMember struct {
	at time.Time
	// incarnation is its etcd process when it passed (member.Clients.Incarnation); empty when etcd did not
	// say, and then a look that cannot reach it counts as its failure, the safe side.
	incarnation Incarnation
	// unseenSince is the first of the looks in a row that could not reach it; zero when the last one did.
	unseenSince time.Time
	// oneLook says it passed on one healthy look, its revision proved by another member: when that proof
	// fails (a member on the revision did not stay up), so does its own.
	oneLook bool
	// witness is the kubelet's account of its pod since it passed: a member no look reaches is held for
	// only while its pod stays Ready, never restarted.
	witness health.PodWitness
}

// failed is the gate failure of a member that passed and then was seen not to stay up, with the kubelet's
// account so far and whether the last look never reached its etcd (the peers' word, which onMemberFailure
// weighs only for an unreached member whose pod was kept Ready).
func (p *passedMember) failed(pod, seen string, unreached bool) *GateTimeoutError {
	return &GateTimeoutError{Pod: pod, Gate: GateEtcdHealth, PassedAt: p.at, LastSeen: seen, PodStayedUp: p.witness.StayedUp(), Unreached: unreached}
}

// newPassed records a member that passed its gates now, as pass says: its etcd process and its pod. A passage
// whose pod nobody witnessed (etcd's word only) takes its witness from the pod now.
func (r *run) newPassed(ctx context.Context, pod string, pass passage, oneLook bool) *passedMember {
	p := &passedMember{at: time.Now(), incarnation: pass.incarnation, oneLook: oneLook, witness: pass.witness}
	if !p.witness.Seen {
		r.e.sts.WitnessPod(ctx, pod, &p.witness)
	}
	delete(r.downAfterPass, pod) // passing again proves it again (withProven)
	delete(r.seenDownSincePass, pod)
	return p
}

// coolDown waits the cool-down owed after a member, watching the members this run rolled: one that stops
// answering meanwhile, or answers from a new etcd process, did not stay up on the new revision (a crash loop
// that outlasted the gate's stability window), and the run stops there, before it disrupts another member.
// A member it cannot reach at all is held for, not failed (passedMember). again says the caller must look
// again first.
func (r *run) coolDown(ctx context.Context) (again bool, err error) {
	e := r.e
	if !r.cooldownDue {
		return false, nil
	}
	r.cooldownDue = false
	if e.cfg.Cooldown <= 0 {
		return r.checkPassed(ctx)
	}
	e.announce(Event{Kind: EventCoolingDown, Step: Step{Kind: StepCooldown}}, "cooling down %s", e.cfg.Cooldown)
	end := time.Now().Add(e.cfg.Cooldown)
	holding := false
	// Between looks: the poll interval, shortened so the last look falls at the end, unless a member is
	// held for, which keeps the cool-down going past it.
	untilNextLook := func(ctx context.Context) error {
		wait := e.pollEvery
		if !holding {
			wait = max(0, min(wait, time.Until(end)))
		}
		return poll.Sleep(ctx, wait)
	}
	_, err = poll.Until(ctx, time.Time{}, untilNextLook, func(ctx context.Context) (struct{}, bool, error) {
		// The last look also asks whether the same processes serve: a restart between two looks answers both.
		last := !time.Now().Before(end)
		var err error
		holding, err = r.lookAtPassed(ctx, last)
		return struct{}{}, last && !holding, err
	})
	if err != nil && ctx.Err() != nil {
		return true, fmt.Errorf("during cool-down: %w", err)
	}
	return true, err
}

// checkPassed is what is left of the cool-down when there is none: before the next disruption, every member
// this run saw pass must still answer from the etcd process that passed, so a crash loop slower than the
// stability window is still caught before another member goes down. A member no look reaches is held for, as
// in a cool-down; again is set after such a hold.
func (r *run) checkPassed(ctx context.Context) (again bool, err error) {
	_, err = poll.Until(ctx, time.Time{}, poll.Every(r.e.pollEvery), func(ctx context.Context) (struct{}, bool, error) {
		holding, err := r.lookAtPassed(ctx, true)
		again = again || holding
		return struct{}{}, !holding, err
	})
	if err != nil && ctx.Err() != nil {
		return true, fmt.Errorf("checking the members that passed: %w", err)
	}
	return again, err
}

// lookAtPassed looks at every member this run saw pass; holding says one of them could not be reached, or
// was forgotten because someone else replaced its pod (forgetReplaced): either way the run looks again.
// withIncarnation also checks that each still runs the etcd process that passed: a restart between two
// looks answers both.
func (r *run) lookAtPassed(ctx context.Context, withIncarnation bool) (holding bool, err error) {
	for _, ordinal := range r.passedOrdinals() {
		h, err := r.stillUp(ctx, ordinal, r.passed[ordinal], withIncarnation)
		if err != nil {
			return false, err
		}
		holding = holding || h
	}
	return holding, nil
}

// stillUp is one cool-down look at a member that passed; see coolDown.
func (r *run) stillUp(ctx context.Context, ordinal int, p *passedMember, withIncarnation bool) (holding bool, err error) {
	pod := planner.PodName(r.e.cfg.StatefulSet, ordinal)
	l := r.e.stillAnswers(ctx, pod)
	switch {
	case ctx.Err() != nil:
		return false, nil // the caller's wait reports the cancellation
	case l.OK && (withIncarnation || !p.unseenSince.IsZero()):
		return r.sameProcess(ctx, ordinal, p)
	case l.OK:
		return false, nil
	case l.NoLook && p.incarnation.Known():
		return r.unseen(ctx, ordinal, p, l.Seen)
	}
	if forgot, err := r.replacedOrEnded(ctx, ordinal, p); forgot || err != nil {
		return forgot, err
	}
	r.e.sts.WitnessPod(ctx, pod, &p.witness)
	return false, p.failed(pod, l.Seen+", during the cool-down", l.NoLook)
}

// sameProcess checks, for a member that answers, that the etcd process that passed still serves it.
func (r *run) sameProcess(ctx context.Context, ordinal int, p *passedMember) (holding bool, err error) {
	if !p.incarnation.Known() {
		return false, nil
	}
	pod := planner.PodName(r.e.cfg.StatefulSet, ordinal)
	inc, err := r.e.etcd.Incarnation(ctx, pod)
	switch {
	case err != nil:
		if l := r.e.stillAnswers(ctx, pod); !l.OK && !l.NoLook && ctx.Err() == nil {
			// Down by its own answer right after it answered: a crash loop between two looks (the schedule
			// checker's seed 5111 of 10,000: such a member was held for as unseen, then reported rolled).
			if forgot, err := r.replacedOrEnded(ctx, ordinal, p); forgot || err != nil {
				return forgot, err
			}
			return false, p.failed(pod, l.Seen+", right after it answered, during the cool-down", false)
		}
		return r.unseen(ctx, ordinal, p, "answers, but its process start could not be read: "+err.Error())
	case !inc.Same(p.incarnation):
		if forgot, err := r.replacedOrEnded(ctx, ordinal, p); forgot || err != nil {
			return forgot, err
		}
		return false, p.failed(pod, fmt.Sprintf("restarted during the cool-down (etcd process started at %s, the one that passed at %s)", inc, p.incarnation), false)
	}
	if !p.unseenSince.IsZero() {
		r.e.emit(Step{Kind: StepCooldown, Ordinal: ordinal}, "%s answers again from the etcd process that passed (started at %s): the looks that failed never reached it",
			pod, inc)
		p.unseenSince = time.Time{}
	}
	return false, nil
}

// unseen records a look that could not reach a member that passed. The run holds for it (holding) until a
// look reaches it, for at most the health timeout, the time any member has to show it is healthy.
func (r *run) unseen(ctx context.Context, ordinal int, p *passedMember, seen string) (holding bool, err error) {
	e := r.e
	pod := planner.PodName(e.cfg.StatefulSet, ordinal)
	if e.sts.WitnessPod(ctx, pod, &p.witness); p.witness.Fell != "" {
		if forgot, err := r.replacedOrEnded(ctx, ordinal, p); forgot || err != nil {
			return forgot, err
		}
		return false, p.failed(pod, seen+"; and "+p.witness.Fell, true)
	}
	if p.unseenSince.IsZero() {
		p.unseenSince = time.Now()
		e.emit(Step{Kind: StepCooldown, Ordinal: ordinal}, "cannot look at %s (%s); holding until a look reaches it (at most %s)", pod, seen, e.cfg.HealthTimeout)
	}
	if time.Since(p.unseenSince) > e.cfg.HealthTimeout {
		return false, fmt.Errorf("%w: %s, for %s: %s; it may be healthy, so it is not reverted: check the port-forward path to it (API server, kubelet), then run again",
			ErrMemberUnseen, pod, e.cfg.HealthTimeout, seen)
	}
	return true, nil
}

// holdUnseen is the step for a member that passed and that the last observation could not reach: one whose
// own failure it saw fails its gate, one it could not look at is held for until a look reaches it.
func (r *run) holdUnseen(ctx context.Context, ordinal int, p *passedMember, m MemberState) error {
	if !m.Unseen || !p.incarnation.Known() {
		if forgot, err := r.replacedOrEnded(ctx, ordinal, p); forgot || err != nil {
			return err // forgotten: looked at again, as what it is now
		}
		r.e.sts.WitnessPod(ctx, m.Pod, &p.witness)
		return p.failed(m.Pod, m.Problem, m.Unseen)
	}
	if _, err := r.unseen(ctx, ordinal, p, m.Problem); err != nil {
		return err
	}
	_, err := poll.Until(ctx, time.Time{}, poll.Every(r.e.pollEvery), func(ctx context.Context) (struct{}, bool, error) {
		holding, err := r.stillUp(ctx, ordinal, p, false)
		return struct{}{}, !holding, err
	})
	if err != nil && ctx.Err() != nil {
		return fmt.Errorf("waiting to look at %s again: %w", m.Pod, err)
	}
	return err
}
