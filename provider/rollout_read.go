package provider

import (
	"context"
	"errors"
	"fmt"
	"strings"

	p "github.com/pulumi/pulumi-go-provider"
	"github.com/pulumi/pulumi-go-provider/infer"
	appsv1 "k8s.io/api/apps/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/client-go/rest"

	"github.com/etcd-rollout/pulumi-etcd-rollout/rollout"
)

var _ infer.CustomRead[RolloutArgs, RolloutState] = (*Rollout)(nil)

// Read serves `pulumi refresh` and `pulumi import`. It observes the StatefulSet and its members the way a
// preview does (reads only: no Lease, no partition write, no pod touched) and records what is live:
//
//   - updateRevision is the StatefulSet's current one; plan lists what the next rollout would do (members not
//     at updateRevision, members to wait for, a partition to re-lock), so the next preview shows the update;
//   - complete is true only when the partition is locked and no member needs anything;
//   - everything Read does not observe (the last run's history: membersRolled, leaderTransfers,
//     unplannedElections, finishedAt, and any field it does not know) is copied from the old state.
//
// A StatefulSet that no longer exists: Read answers as pulumi-kubernetes' Read does for a deleted object, with
// an empty ID, and the engine drops the resource from the state (pulumi v3.276 RefreshStep: "If the ID is blank
// treat this as a delete"). Keeping it would be worse: its Check would refuse the missing StatefulSet in the
// next preview, and its UID guard would refuse the one the program creates again. Dropped, the next `pulumi
// up` creates the Rollout anew, after the StatefulSet it depends on.
//
// A StatefulSet with another UID (recreated, or the kubeconfig now reaches another cluster) is not this
// rollout's: Read keeps the old state untouched and warns, so its history and UID guard are not overwritten by
// a stranger's. The engine then diffs the refreshed state against the last inputs (pulumi v3.276 RefreshStep,
// unless PULUMI_ENABLE_LEGACY_REFRESH_DIFF), and Diff's UID guard answers with its refusal, so that refresh
// ends with the guard's message (replace the Rollout) rather than silently adopting the other StatefulSet.
//
// An import (only the ID, `namespace/name`, is known) fills the inputs from the live StatefulSet: serviceName
// from spec.serviceName, clientPort and tls from the etcd container's flags, and versionHash from
// status.updateRevision (the program's own versionHash then differs, and the first `pulumi up` after the
// import runs a rollout that finds every member already updated and only re-locks).
func (r *Rollout) Read(ctx context.Context, req infer.ReadRequest[RolloutArgs, RolloutState]) (infer.ReadResponse[RolloutArgs, RolloutState], error) {
	in, importing, err := readTarget(req)
	if err != nil {
		return infer.ReadResponse[RolloutArgs, RolloutState]{}, err
	}
	log := p.GetLogger(ctx)
	target := in.target()
	ctx, cancel := context.WithTimeout(ctx, observeTimeout)
	defer cancel()

	restConfig, err := r.deps.RestConfig(in.access())
	if err != nil {
		return infer.ReadResponse[RolloutArgs, RolloutState]{}, fmt.Errorf("cluster access for %s: %w", target, err)
	}
	sts, uid, lease, err := r.liveStatefulSet(ctx, restConfig, in)
	if err != nil {
		return infer.ReadResponse[RolloutArgs, RolloutState]{}, fmt.Errorf("reading StatefulSet %s: %w", target, err)
	}

	st := req.State
	if importing {
		if uid == "" {
			return infer.ReadResponse[RolloutArgs, RolloutState]{}, fmt.Errorf(
				"StatefulSet %s was not found on the cluster the kubeconfig reaches ($KUBECONFIG or ~/.kube/config): nothing to import", target)
		}
		in = importedArgs(in, sts)
		st = stateFromArgs(in)
		st.MembersRolled = []string{}
		st.StatefulSetUID = uid
	}
	resp := infer.ReadResponse[RolloutArgs, RolloutState]{ID: req.ID, Inputs: in, State: st}
	if importing {
		resp.ID = target
	}

	switch {
	case uid == "":
		log.Warningf("StatefulSet %s no longer exists: the rollout is removed from the state, as a deleted Kubernetes object is; "+
			"the next `pulumi up` creates it again after the StatefulSet", target)
		return infer.ReadResponse[RolloutArgs, RolloutState]{}, nil
	case st.StatefulSetUID != "" && st.StatefulSetUID != uid:
		log.Warningf("StatefulSet %s on the cluster has UID %s, but this rollout was run on UID %s: it was recreated, or the "+
			"kubeconfig or context now reaches another cluster. The state is left as it was, so `pulumi up` keeps refusing it; "+
			"if it was recreated on purpose, replace this rollout (`pulumi up --replace <URN of the Rollout>`)",
			target, uid, st.StatefulSetUID)
		return resp, nil
	}

	observed, err := r.observe(ctx, restConfig, in)
	if err != nil && !errors.Is(err, rollout.ErrBlocked) {
		return infer.ReadResponse[RolloutArgs, RolloutState]{}, fmt.Errorf("observing %s: %w", target, err)
	}
	if observed.UpdateRevision != "" {
		resp.State.UpdateRevision = observed.UpdateRevision
	}
	resp.State.Plan, resp.State.Complete = r.livePlan(observed, err, lease)
	if !resp.State.Complete {
		log.Warningf("%s", notCompleteMessage(target, observed, lease, resp.State.Plan))
	}
	return resp, nil
}

// readTarget says which StatefulSet to read: the inputs' on a refresh, the ID's on an import (then importing
// is true and nothing else is known).
func readTarget(req infer.ReadRequest[RolloutArgs, RolloutState]) (RolloutArgs, bool, error) {
	if req.Inputs.StsName != "" && req.Inputs.Namespace != "" {
		return req.Inputs, false, nil
	}
	if req.State.StsName != "" && req.State.Namespace != "" {
		in := req.Inputs
		in.StsName, in.Namespace = req.State.StsName, req.State.Namespace
		return in, false, nil
	}
	namespace, name, ok := strings.Cut(req.ID, "/")
	if !ok || strings.Contains(name, "/") || len(validation.IsDNS1123Label(namespace)) > 0 || len(validation.IsDNS1123Label(name)) > 0 {
		return RolloutArgs{}, false, fmt.Errorf("the ID of a Rollout is <namespace>/<StatefulSet name> (say db/etcd), not %q", req.ID)
	}
	return RolloutArgs{StsName: name, Namespace: namespace}, true, nil
}

// liveStatefulSet returns the StatefulSet (nil when only its UID could be read), its UID ("" when it does
// not exist), and who holds the rollout Lease (zero when that was not read).
func (r *Rollout) liveStatefulSet(ctx context.Context, restConfig *rest.Config, in RolloutArgs) (*appsv1.StatefulSet, string, leaseFacts, error) {
	if r.deps.ReadFacts != nil {
		facts, err := r.deps.ReadFacts(ctx, restConfig, in.Namespace, in.StsName)
		if err != nil || facts.StatefulSet == nil {
			return nil, "", leaseFacts{}, err
		}
		return facts.StatefulSet, string(facts.StatefulSet.UID), facts.Lease, nil
	}
	uid, err := r.deps.LookupUID(ctx, restConfig, in.Namespace, in.StsName)
	if apierrors.IsNotFound(err) {
		return nil, "", leaseFacts{}, nil
	}
	return nil, uid, leaseFacts{}, err
}

// observe reads the StatefulSet and every member once through the engine, which changes nothing.
func (r *Rollout) observe(ctx context.Context, restConfig *rest.Config, in RolloutArgs) (rollout.ClusterState, error) {
	eng, err := r.deps.NewEngine(engineConfig(in, ""), restConfig, func(rollout.Event) {})
	if err != nil {
		return rollout.ClusterState{}, fmt.Errorf("starting the rollout engine: %w", err)
	}
	defer eng.Close()
	return eng.Observe(ctx)
}

// livePlan is the plan the next rollout would follow from this observation, and whether there is nothing
// left to do (every member at updateRevision and healthy, the partition locked). A blocked observation or
// plan ends with a "blocked: ..." line, as the preview shows it, after what was planned before the block (the
// re-lock of a partition someone lowered comes first, so it is recorded even while a pod is missing). A
// partition lowered by a run that still holds the Lease starts with the takeover of that lease, as the
// preview does.
func (r *Rollout) livePlan(observed rollout.ClusterState, observeErr error, lease leaseFacts) ([]string, bool) {
	if observeErr != nil {
		return []string{fmt.Sprintf("blocked: %v", observeErr)}, false
	}
	plan, err := r.deps.Plan(observed, rollout.LeaderLazy)
	lines := withTakeover(append([]string{}, planLines(plan)...), observed, lease)
	if err != nil {
		return append(lines, fmt.Sprintf("blocked: %v", err)), false
	}
	return lines, len(plan.Steps) == 0
}

// notCompleteMessage tells a person running `pulumi refresh` what is not done, and what the next up does.
func notCompleteMessage(target string, s rollout.ClusterState, lease leaseFacts, plan []string) string {
	var outdated []string
	for _, m := range s.Members {
		if s.UpdateRevision != "" && m.Revision != s.UpdateRevision {
			outdated = append(outdated, m.Pod)
		}
	}
	var parts []string
	if len(outdated) > 0 {
		parts = append(parts, fmt.Sprintf("%d member(s) not at updateRevision %s (%s)", len(outdated), s.UpdateRevision, strings.Join(outdated, ", ")))
	}
	switch {
	case s.Partition < 0 || s.Partition >= s.Replicas:
	case lease.Holder != "":
		parts = append(parts, fmt.Sprintf("partition %d is below replicas %d and lease %s is held by %q (a rollout that is running, or one that was killed)",
			s.Partition, s.Replicas, lease.Name, lease.Holder))
	default:
		parts = append(parts, fmt.Sprintf("partition %d is below replicas %d (a rollout is running, or something else lowered it)", s.Partition, s.Replicas))
	}
	if len(parts) == 0 {
		parts = append(parts, "it is not settled")
	}
	return fmt.Sprintf("StatefulSet %s: %s; the refreshed state says the rollout is not complete, and the next `pulumi up` does: %s",
		target, strings.Join(parts, "; "), strings.Join(plan, "; "))
}
