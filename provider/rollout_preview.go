package provider

import (
	"context"
	"errors"
	"fmt"
	"time"

	p "github.com/pulumi/pulumi-go-provider"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"

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
	log := p.GetLogger(ctx)
	ctx, cancel := context.WithTimeout(ctx, observeTimeout)
	defer cancel()
	target := in.Namespace + "/" + in.StsName

	restConfig, err := r.deps.RestConfig(in.access())
	if err != nil {
		return nil, []p.CheckFailure{{Property: "kubeconfig", Reason: fmt.Sprintf("cannot build cluster access: %v", err)}}
	}
	var pending *corev1.Container
	if templateChanges && in.EtcdContainer != nil && *in.EtcdContainer != "" {
		// The component owns the StatefulSet and said what it is about to apply: judge that template.
		if pending, err = parsePendingContainer(*in.EtcdContainer); err != nil {
			return nil, []p.CheckFailure{{Property: "etcdContainer", Reason: err.Error()}}
		}
	}
	var facts clusterFacts
	if r.deps.ReadFacts != nil {
		facts, err = r.deps.ReadFacts(ctx, restConfig, in.Namespace, in.StsName)
		if err != nil {
			log.Warningf("could not read StatefulSet %s to check the inputs and plan the rollout: %v", target, err)
			return nil, nil
		}
		if templateChanges && templateApplied(in, facts) {
			// A run for this versionHash already started (and stopped): its template is the live one, and
			// the members it rolled need no second roll.
			templateChanges, pending = false, nil
		}
		if pending != nil && facts.StatefulSet != nil {
			facts.StatefulSet = withPendingContainer(facts.StatefulSet, pending)
		}
		if failures := preflightFailures(in, facts, mustExist); len(failures) > 0 || facts.StatefulSet == nil {
			if len(failures) == 0 {
				log.Infof("StatefulSet %s does not exist yet; the rollout plan is made when it does", target)
			}
			return nil, failures
		}
	} else if _, err := r.deps.LookupUID(ctx, restConfig, in.Namespace, in.StsName); err != nil {
		if apierrors.IsNotFound(err) {
			if mustExist {
				return nil, []p.CheckFailure{{Property: "stsName", Reason: fmt.Sprintf(
					"StatefulSet %s was not found on the cluster: check stsName and namespace (and the kubeconfig/context in use)", target)}}
			}
			log.Infof("StatefulSet %s does not exist yet; the rollout plan is made when it does", target)
			return nil, nil
		}
		log.Warningf("could not read StatefulSet %s to plan the rollout: %v", target, err)
		return nil, nil
	}

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
	if templateChanges {
		state.UpdateRevision = pendingRevision
		if pending != nil {
			state.TemplateImage, state.TemplateSettings = pending.Image, rollout.EtcdSettings(pending)
		}
	}
	plan, err := r.deps.Plan(state, rollout.LeaderLazy)
	if err != nil {
		if errors.Is(err, rollout.ErrBlocked) {
			log.Warningf("a rollout of %s could not start now: %v", target, err)
			// The run holds before its first step, but not before it has taken a dead run's lease over and
			// re-locked the partition that run left lowered: those come first.
			var lines []string
			if len(plan.Steps) > 0 && plan.Steps[0].Kind == rollout.StepLock {
				lines = withTakeover(planLines(rollout.Plan{Pods: plan.Pods, Steps: plan.Steps[:1]}), state, facts.Lease)
			}
			return append(lines, fmt.Sprintf("blocked: %v", err)), nil
		}
		log.Warningf("could not plan the rollout of %s: %v", target, err)
		return nil, nil
	}
	if !needsRun(plan) {
		return nil, nil
	}
	if d := plan.Downgrade; d != nil && !d.Enabled {
		// etcd's own word on the downgrade, before `pulumi up` enables it: validate changes nothing.
		if err := eng.ValidateDowngrade(ctx, state, d.Target); err != nil {
			return nil, []p.CheckFailure{{Property: "stsName", Reason: fmt.Sprintf("StatefulSet %s: %v", target, err)}}
		}
		d.Validated = true
	}
	return withTakeover(planLines(plan), state, facts.Lease), nil
}
