package planner

import (
	"fmt"
	"time"
)

// ControllerWillAct holds (ErrBlocked, naming the pod) a step that needs the StatefulSet controller to act
// while the controller would not: under OrderedReady it neither restarts nor recreates any pod while one it
// passes on the way is not Running and Ready, and available for minReadySeconds, whatever etcd says of the
// member behind it. Lowering the partition then would only wait out the ready timeout with the partition
// lowered, and blame the revision for a pod that never left the old one.
//
// Which pods the controller passes (kubernetes' stateful_set_control.go): for an update, every pod, in
// ordinal order, before it deletes the highest outdated one; for the recreation of a deleted pod, those
// below it. Under Parallel it recreates a deleted pod at once, and, since Kubernetes 1.35
// (MaxUnavailableStatefulSet on by default), updates nothing while any pod is unavailable: it counts them
// across every ordinal against maxUnavailable, 1 here. Before 1.35 it waited only for the pods above an
// update's target; holding on the others too costs an older cluster nothing but a wait for a pod that is
// out anyway, and keeps one member disrupted at a time (issue 31's audit 2: under Parallel the run lowered
// the partition and waited out the ready timeout with it lowered).
func ControllerWillAct(st ClusterState, step Step) error {
	var target int
	var recreate bool
	switch step.Kind {
	case StepLowerPartition:
		target, recreate = step.Ordinal, step.AlreadyDown
	case StepRecreate:
		target, recreate = step.Ordinal, true
	default:
		return nil
	}
	for _, m := range st.Members {
		if m.Ordinal == target && recreate {
			continue // its pod is deleted: the controller creates it anew
		}
		var waitedFor bool
		switch {
		case !recreate:
			waitedFor = true
		case st.OrderedReady:
			waitedFor = m.Ordinal < target
		}
		if why := unavailable(st, m); waitedFor && why != "" {
			return Blocked("the StatefulSet controller will not act on %s while %s %s (podManagementPolicy %s); holding until it is",
				st.Members[target].Pod, m.Pod, why, podManagement(st))
		}
	}
	return nil
}

// unavailable says why the controller counts m's pod as not available ("" when it is): not Running, not
// Ready, or Ready for less than minReadySeconds (counted by this process's clock to the pod's Ready
// transition, by the node's: a clock behind only makes the run hold longer).
func unavailable(st ClusterState, m MemberState) string {
	switch {
	case !m.PodExists:
		return "does not exist"
	case !m.Running:
		return "is not Running"
	case !m.Ready:
		return "is not Ready"
	}
	if st.MinReadySeconds > 0 && !st.ObservedAt.IsZero() {
		need := time.Duration(st.MinReadySeconds) * time.Second
		if ready := st.ObservedAt.Sub(m.ReadySince); m.ReadySince.IsZero() || ready < need {
			return fmt.Sprintf("has been Ready for less than minReadySeconds (%ds)", st.MinReadySeconds)
		}
	}
	return ""
}

func podManagement(st ClusterState) string {
	if st.OrderedReady {
		return "OrderedReady"
	}
	return "Parallel"
}

// AnotherRolledMemberDown is a member other than ordinal that is down by its own answer on a revision a rollout
// put it on (the update revision, or one a template since replaced), nil when none: one disrupted at a time,
// so it is waited for before the next disruption (the schedule checker's seed 14653 of the long mode: a
// resumed replacement let its pod go while etcd-4, replaced by the run before, was down; seed 32635 of
// 100,000: after a template change, etcd-4 was removed while etcd-3, replaced onto the template before, was
// down). A member down on the current revision is no rollout's doing.
func AnotherRolledMemberDown(st ClusterState, ordinal int) *MemberState {
	for i, m := range st.Members {
		if m.Ordinal != ordinal && m.PodExists && m.Revision != st.CurrentRevision && !m.Healthy && !m.Unseen {
			return &st.Members[i]
		}
	}
	return nil
}
