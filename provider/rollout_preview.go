package provider

import (
	"context"
	"errors"
	"fmt"
	"time"

	p "github.com/pulumi/pulumi-go-provider"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/client-go/rest"

	"github.com/etcd-rollout/pulumi-etcd-rollout/rollout"
)

// observeTimeout bounds the cluster reads Check makes, so an unreachable cluster slows a preview down by
// seconds, not minutes.
const observeTimeout = 45 * time.Second

// pendingRevision stands for the revision the StatefulSet controller will compute from a template that has
// not been applied yet (the preview of a template change runs before the StatefulSet is updated).
const pendingRevision = "(new pod template)"

// previewPlan checks the inputs against the live cluster, then observes it and plans the next rollout.
// templateChanges says the pod template is about to change, so every member counts as outdated whatever the
// live StatefulSet says. mustExist says the StatefulSet must already be on the cluster: the Rollout is in
// the state, or nothing this update creates stands before it (stsMustExist); a missing one is then a bad
// input, otherwise the same update may create it. It returns failures only for bad input; a cluster that
// cannot be read is a warning and an empty plan. Nothing here writes to the cluster.
func (r *Rollout) previewPlan(ctx context.Context, in RolloutArgs, templateChanges, mustExist bool) ([]string, []p.CheckFailure) {
	ctx, cancel := context.WithTimeout(ctx, observeTimeout)
	defer cancel()
	restConfig, err := r.deps.RestConfig(in.access())
	if err != nil {
		return nil, []p.CheckFailure{{Property: "kubeconfig", Reason: fmt.Sprintf("cannot build cluster access: %v", err)}}
	}
	pv := preview{templateChanges: templateChanges}
	if templateChanges && in.EtcdContainer != nil && *in.EtcdContainer != "" {
		// The component owns the StatefulSet and said what it is about to apply: judge that template.
		if pv.pending, err = parsePendingContainer(*in.EtcdContainer); err != nil {
			return nil, []p.CheckFailure{{Property: "etcdContainer", Reason: err.Error()}}
		}
	}
	if failures, exists := r.checkLive(ctx, restConfig, in, mustExist, &pv); !exists {
		return nil, failures
	}
	return r.planLive(ctx, restConfig, in, pv)
}

// preview is what previewPlan knows before it plans: the live facts, and the template about to be applied.
type preview struct {
	facts           clusterFacts
	pending         *corev1.Container // the etcd container the component is about to apply; nil when unknown
	templateChanges bool
}

// checkLive reads the StatefulSet and checks the inputs against it (preflightFailures), updating pv with what
// it read. exists says there is a StatefulSet to plan for; without it, failures are the bad inputs found (none
// when the StatefulSet is not there yet, or could not be read: a warning then).
func (r *Rollout) checkLive(ctx context.Context, restConfig *rest.Config, in RolloutArgs, mustExist bool, pv *preview) (failures []p.CheckFailure, exists bool) {
	log := p.GetLogger(ctx)
	target := in.target()
	if r.deps.ReadFacts == nil {
		_, err := r.deps.LookupUID(ctx, restConfig, in.Namespace, in.StsName)
		switch {
		case apierrors.IsNotFound(err) && mustExist:
			return []p.CheckFailure{{Property: "stsName", Reason: fmt.Sprintf(
				"StatefulSet %s was not found on the cluster: check stsName and namespace (and the kubeconfig/context in use)", target)}}, false
		case apierrors.IsNotFound(err):
			log.Infof("StatefulSet %s does not exist yet; the rollout plan is made when it does", target)
		case err != nil:
			log.Warningf("could not read StatefulSet %s to plan the rollout: %v", target, err)
		}
		return nil, err == nil
	}
	facts, err := r.deps.ReadFacts(ctx, restConfig, in.Namespace, in.StsName)
	if err != nil {
		log.Warningf("could not read StatefulSet %s to check the inputs and plan the rollout: %v", target, err)
		return nil, false
	}
	if pv.templateChanges && templateApplied(in, facts) {
		// A run for this versionHash already started (and stopped): its template is the live one, and the
		// members it rolled need no second roll.
		pv.templateChanges, pv.pending = false, nil
	}
	if pv.pending != nil && facts.StatefulSet != nil {
		facts.StatefulSet = withPendingContainer(facts.StatefulSet, pv.pending)
	}
	pv.facts = facts
	failures = preflightFailures(in, facts, mustExist)
	if len(failures) == 0 && facts.StatefulSet == nil {
		log.Infof("StatefulSet %s does not exist yet; the rollout plan is made when it does", target)
	}
	return failures, len(failures) == 0 && facts.StatefulSet != nil
}

// planLive observes the cluster through the engine and plans the rollout that `pulumi up` would run: the
// plan's lines, a blocked rollout's reason, or failures for a downgrade etcd refuses.
func (r *Rollout) planLive(ctx context.Context, restConfig *rest.Config, in RolloutArgs, pv preview) ([]string, []p.CheckFailure) {
	log := p.GetLogger(ctx)
	target := in.target()
	eng, err := r.deps.NewEngine(engineConfig(in, ""), restConfig, func(rollout.Event) {})
	if err != nil {
		log.Warningf("could not start the rollout engine to plan %s: %v", target, err)
		return nil, nil
	}
	defer eng.Close()
	state, err := eng.Observe(ctx)
	if err != nil {
		log.Warningf("could not observe %s to plan the rollout: %v", target, err)
		return nil, nil
	}
	if failure := unansweredFailure(in, state, time.Now()); failure != nil {
		return nil, []p.CheckFailure{*failure}
	}
	if pv.templateChanges {
		state.UpdateRevision = pendingRevision
		if pv.pending != nil {
			state.TemplateImage, state.TemplateSettings = pv.pending.Image, rollout.EtcdSettings(pv.pending)
			// The probes the roll will run under are the new template's, not the live one's.
			state.ProbeWarnings = rollout.JudgeProbes(pv.pending)
		}
	}
	plan, err := r.deps.Plan(state, rollout.LeaderLazy)
	if plan.Snapshot != nil {
		plan.Snapshot.To = engineConfig(in, "").SnapshotDestination()
	}
	// The gate's Preview sequence, as the run's Start: a hold is waited out; a missing consent is not, it is
	// refused first; the version path, etcd's validation of a downgrade and the members' trust.
	err = rollout.GatePreview(ctx, eng, engineConfig(in, ""), state, &plan, err)
	switch {
	case errors.Is(err, rollout.ErrSingleMember):
		// Waiting changes nothing: consent does, and the run refuses without it before anything is touched.
		return nil, []p.CheckFailure{{Property: "acceptWriteOutage", Reason: fmt.Sprintf("StatefulSet %s: %v", target, err)}}
	case errors.Is(err, rollout.ErrLearnerLeftBehind) || errors.Is(err, rollout.ErrVersionPath) ||
		errors.As(err, new(*rollout.DowngradeNotValidatedError)):
		// Blocked, but not for waiting: the run refuses it at once too.
		return nil, []p.CheckFailure{{Property: "stsName", Reason: fmt.Sprintf("StatefulSet %s: %v", target, err)}}
	case errors.Is(err, rollout.ErrBlocked):
		log.Warningf("a rollout of %s could not start now: %v", target, err)
		return blockedLines(plan, state, pv.facts, err), nil
	case errors.Is(err, rollout.ErrDataDiesWithPod) || errors.Is(err, rollout.ErrPreStopRemovesMember) ||
		errors.Is(err, rollout.ErrPeerTrust) || errors.Is(err, rollout.ErrClientTrust) ||
		errors.Is(err, rollout.ErrPeerURLFollowsPod) || errors.Is(err, rollout.ErrUnsafeStrategy):
		// The run refuses these before it touches anything, and waiting changes nothing: so does the preview.
		return nil, []p.CheckFailure{{Property: "stsName", Reason: fmt.Sprintf("StatefulSet %s: %v", target, err)}}
	case err != nil:
		log.Warningf("could not plan the rollout of %s: %v", target, err)
		return nil, nil
	case !needsRun(plan):
		return nil, nil
	}
	for _, w := range state.ProbeWarnings {
		// The roll goes on (the engine gates on etcd's word), but a person should know before it does.
		log.Warningf("%s: %s", target, w)
	}
	return withTakeover(planLines(plan), state, pv.facts.Lease), nil
}

// blockedLines is the preview of a rollout that cannot start now. The run holds before its first step, but
// not before it has taken a dead run's lease over and re-locked the partition that run left lowered: those
// come first.
func blockedLines(plan rollout.Plan, state rollout.ClusterState, facts clusterFacts, blocked error) []string {
	var lines []string
	if len(plan.Steps) > 0 && plan.Steps[0].Kind == rollout.StepLock {
		lines = withTakeover(planLines(rollout.Plan{Pods: plan.Pods, Steps: plan.Steps[:1]}), state, facts.Lease)
	}
	return append(lines, fmt.Sprintf("blocked: %v", blocked))
}
