package provider

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	p "github.com/pulumi/pulumi-go-provider"
	"github.com/pulumi/pulumi-go-provider/infer"

	"github.com/etcd-rollout/pulumi-etcd-rollout/rollout"
)

var (
	_ infer.CustomResource[RolloutArgs, RolloutState] = (*Rollout)(nil)
	_ infer.CustomUpdate[RolloutArgs, RolloutState]   = (*Rollout)(nil)
)

// Create runs the first rollout of a StatefulSet. Usually there is nothing to roll (the StatefulSet was just
// created at its update revision), but it still locks the partition and records the StatefulSet's UID.
func (r *Rollout) Create(ctx context.Context, req infer.CreateRequest[RolloutArgs]) (infer.CreateResponse[RolloutState], error) {
	id := req.Inputs.Namespace + "/" + req.Inputs.StsName
	st := stateFromArgs(req.Inputs)
	if req.DryRun {
		return infer.CreateResponse[RolloutState]{ID: id, Output: previewOutputs(st)}, nil
	}
	err := r.roll(ctx, id, req.Inputs, &st)
	return infer.CreateResponse[RolloutState]{ID: id, Output: st}, err
}

// Update runs the rollout for a new versionHash, or finishes one that an earlier run left half done.
func (r *Rollout) Update(ctx context.Context, req infer.UpdateRequest[RolloutArgs, RolloutState]) (infer.UpdateResponse[RolloutState], error) {
	st := stateFromArgs(req.Inputs)
	st.StatefulSetUID = req.State.StatefulSetUID
	st.LastFailure = req.State.LastFailure // kept until a run completes: see recordFailure
	if req.DryRun {
		return infer.UpdateResponse[RolloutState]{Output: previewOutputs(st)}, nil
	}
	err := r.roll(ctx, req.ID, req.Inputs, &st)
	return infer.UpdateResponse[RolloutState]{Output: st}, err
}

// roll runs the engine to completion and fills st with what it did. On failure or cancellation (Ctrl-C, a
// customTimeouts deadline: both cancel ctx) it returns infer.ResourceInitFailedError with st holding the
// partial result, so Pulumi keeps that state and the next `pulumi up` calls Update, which resumes.
func (r *Rollout) roll(ctx context.Context, id string, in RolloutArgs, st *RolloutState) error {
	holder := "pulumi-etcd-rollout " + id + " @" + rollout.RunIdentity() // unique to this run: see rollout.RunIdentity
	log := p.GetLogger(ctx)
	target := in.target()
	st.Complete, st.FinishedAt, st.MembersRolled = false, "", []string{}

	restConfig, err := r.deps.RestConfig(in.access())
	if err != nil {
		return fmt.Errorf("cluster access for %s: %w", target, err)
	}
	eng, err := r.deps.NewEngine(engineConfig(in, holder), restConfig, func(ev rollout.Event) {
		if ev.Step.Kind == rollout.StepLock {
			// The re-lock of a partition a dead run left lowered: a recovery the person running
			// `pulumi up` should find in its diagnostics, not only in a passing status line.
			log.Warningf("%s: %s", target, ev.Message)
			return
		}
		log.InfoStatusf("%s", ev.Message)
	})
	if err != nil {
		return fmt.Errorf("starting the rollout engine for %s: %w", target, err)
	}
	defer eng.Close()

	observed, err := eng.Observe(ctx)
	if err != nil {
		return fmt.Errorf("observing %s before rolling it: %w", target, err)
	}
	if err := sameStatefulSet(in, *st, observed.StatefulSetUID); err != nil {
		return err
	}
	st.StatefulSetUID = observed.StatefulSetUID
	st.UpdateRevision = observed.UpdateRevision

	if dl, ok := ctx.Deadline(); ok {
		log.Debugf("rolling %s with a deadline in %s (customTimeouts)", target, time.Until(dl).Round(time.Second))
	}
	res, runErr := eng.Run(ctx)
	recordResult(st, res)
	recordFailure(st, res, runErr == nil)
	if runErr != nil {
		st.Plan = r.planLeft(ctx, eng, st.Plan)
		return r.partial(ctx, in, st, runErr)
	}
	st.Complete = true
	st.Plan = []string{}
	if res.FinishedAt.IsZero() {
		res.FinishedAt = time.Now()
	}
	st.FinishedAt = res.FinishedAt.UTC().Format(time.RFC3339)
	log.Info(summary(target, res))
	return nil
}

// partial logs why the run stopped and turns the error into the partial-state error Pulumi understands.
func (r *Rollout) partial(ctx context.Context, in RolloutArgs, st *RolloutState, runErr error) error {
	target := in.target()
	reason := failureReason(target, st.MembersRolled, runErr, st.LastFailure)
	if errors.Is(runErr, context.Canceled) || errors.Is(runErr, context.DeadlineExceeded) || ctx.Err() != nil {
		reason = fmt.Sprintf("rollout of %s was cancelled after %d member(s) (%s); the engine re-locks the partition on the way out. "+
			"Run `pulumi up` again to finish the remaining members: %v",
			target, len(st.MembersRolled), strings.Join(st.MembersRolled, ", "), runErr)
	}
	p.GetLogger(ctx).Error(reason)
	if len(st.Plan) == 0 {
		st.Plan = []string{"finish the interrupted rollout"}
	}
	return infer.ResourceInitFailedError{Reasons: []string{reason}}
}

// planLeft is the plan of what is left after a run that stopped, read afresh from the cluster, so that the
// state says where the roll (and a downgrade: enabled or not, which members are on which version) stands and
// what the next `pulumi up` will do. It keeps the plan it had when the cluster cannot be read.
func (r *Rollout) planLeft(ctx context.Context, eng Engine, had []string) []string {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), observeTimeout)
	defer cancel()
	state, err := eng.Observe(ctx)
	if err != nil {
		return had
	}
	plan, err := r.deps.Plan(state, rollout.LeaderLazy)
	switch {
	case errors.Is(err, rollout.ErrBlocked):
		return []string{fmt.Sprintf("blocked: %v", err)}
	case err != nil:
		return had
	case !needsRun(plan):
		return []string{}
	}
	return planLines(plan)
}

func recordResult(st *RolloutState, res rollout.Result) {
	if res.UpdateRevision != "" {
		st.UpdateRevision = res.UpdateRevision
	}
	st.MembersRolled = append([]string{}, res.MembersRolled...)
	st.LeaderTransfers = res.LeaderTransfers
	st.UnplannedElections = nil // not measured: absent, never a 0 nobody counted
	if !res.ElectionsUnknown {
		st.UnplannedElections = &res.UnplannedElections
	}
	if res.Snapshot != nil {
		st.Snapshot = newRolloutSnapshot(res.Snapshot) // kept until a later run stores another: the rollback path
	}
	if res.WriteOutage != nil {
		st.WriteOutage = newRolloutWriteOutage(res.WriteOutage) // kept until a later run measures another
	}
	st.SnapshotSkipped = nil
	if res.SnapshotSkipped != "" {
		st.SnapshotSkipped = &res.SnapshotSkipped
	}
}

// summary is the one line a completed rollout leaves in the `pulumi up` diagnostics.
func summary(target string, res rollout.Result) string {
	took := ""
	if !res.StartedAt.IsZero() && !res.FinishedAt.IsZero() {
		took = " in " + res.FinishedAt.Sub(res.StartedAt).Round(time.Second).String()
	}
	if len(res.MembersRolled) == 0 {
		return fmt.Sprintf("%s: every member already at revision %s; partition locked%s", target, res.UpdateRevision, took)
	}
	elections := fmt.Sprintf("%d unplanned election(s)", res.UnplannedElections)
	if res.ElectionsUnknown {
		elections = "unplanned elections unknown (" + res.ElectionsUnknownWhy + ")"
	}
	line := fmt.Sprintf("%s: rolled %d member(s) (%s) to revision %s%s; %d leader transfer(s), %s, %d API request(s); partition locked",
		target, len(res.MembersRolled), strings.Join(res.MembersRolled, ", "), res.UpdateRevision, took,
		res.LeaderTransfers, elections, res.APIRequests)
	switch {
	case res.Snapshot != nil:
		line += fmt.Sprintf("; snapshot before the first restart: %s (revision %d, sha256 %s)", res.Snapshot.Location, res.Snapshot.Revision, res.Snapshot.SHA256)
	case res.SnapshotSkipped != "":
		line += "; NO snapshot before the point of no return (proceedWithoutSnapshot): " + res.SnapshotSkipped
	}
	if res.WriteOutage != nil {
		line += "; " + res.WriteOutage.String()
	}
	return line
}
