package provider

import (
	"github.com/pulumi/pulumi-go-provider/infer"
)

// Rollout is the custom resource that does the work: its Create and Update run the engine and return only
// when every member is at the StatefulSet's updateRevision, healthy, and the partition is locked again. Its
// Diff is what `pulumi preview` shows of a pending rollout. EtcdRollingUpgrade registers one as its child;
// programs rarely create it directly.
type Rollout struct {
	deps Deps
}

// TLS names the client certificate files as they are mounted inside the etcd container. They are paths, not
// material: the engine reads the material from the cluster and keeps it in memory.
type TLS struct {
	CaFile   string `pulumi:"caFile"`
	CertFile string `pulumi:"certFile"`
	KeyFile  string `pulumi:"keyFile"`
}

// Annotate documents TLS in the schema.
func (t *TLS) Annotate(a infer.Annotator) {
	a.SetToken("index", "TLS")
	a.Describe(t, "Client TLS files as mounted inside the etcd container; all three or none.")
	a.Describe(&t.CaFile, "Path of the CA certificate inside the etcd container.")
	a.Describe(&t.CertFile, "Path of the client certificate inside the etcd container.")
	a.Describe(&t.KeyFile, "Path of the client key inside the etcd container.")
}

// RolloutArgs are the Rollout's inputs. The names match the old TypeScript EtcdRollingUpgrade class.
type RolloutArgs struct {
	StsName              string  `pulumi:"stsName"`
	Namespace            string  `pulumi:"namespace"`
	ServiceName          string  `pulumi:"serviceName"`
	ClientPort           *int    `pulumi:"clientPort,optional"`
	TLS                  *TLS    `pulumi:"tls,optional"`
	VersionHash          string  `pulumi:"versionHash"`
	CooldownSeconds      *int    `pulumi:"cooldownSeconds,optional"`
	ReadyTimeoutSeconds  *int    `pulumi:"readyTimeoutSeconds,optional"`
	HealthTimeoutSeconds *int    `pulumi:"healthTimeoutSeconds,optional"`
	OnFailure            *string `pulumi:"onFailure,optional"`

	// Cluster access. Changing these never causes a diff: rotating credentials must not roll etcd.
	Kubeconfig *string `pulumi:"kubeconfig,optional" provider:"secret"`
	Context    *string `pulumi:"context,optional"`
	Cluster    *string `pulumi:"cluster,optional"`

	// StsMustExist is set by EtcdRollingUpgrade when nothing this update creates stands before the
	// StatefulSet: then a missing one is refused in preview even on the first create. Never a diff.
	StsMustExist *bool `pulumi:"stsMustExist,optional"`

	// AcceptPreStopMemberRemoval rolls pods whose preStop hook removes their own member. Never a diff: it
	// changes what a run may do, not what the cluster should be.
	AcceptPreStopMemberRemoval *bool `pulumi:"acceptPreStopMemberRemoval,optional"`

	// EtcdContainer is set by EtcdRollingUpgrade when it owns the StatefulSet: the etcd container of the pod
	// template it is about to apply, so that a preview judges the new template's etcd version and flags
	// before the StatefulSet is updated. Never a diff.
	EtcdContainer *string `pulumi:"etcdContainer,optional"`

	// Plan is written by the provider's Check from the live cluster; it is an input so that the CLI's diff
	// (old outputs against new inputs) can show it.
	Plan []string `pulumi:"plan,optional"`
}

// Annotate documents RolloutArgs in the schema.
func (r *RolloutArgs) Annotate(a infer.Annotator) {
	a.Describe(&r.StsName, "Name of the etcd StatefulSet.")
	a.Describe(&r.Namespace, "Namespace of the StatefulSet.")
	a.Describe(&r.ServiceName, "The StatefulSet's governing (headless) Service.")
	a.Describe(&r.ClientPort, "etcd client port on each pod. Default 2379.")
	a.Describe(&r.TLS, "Client TLS files as mounted inside the etcd container; all three or none.")
	a.Describe(&r.VersionHash, "Changes whenever the pod template changes; a change means a rollout.")
	a.Describe(&r.CooldownSeconds, "Pause after each member passes its health gate. Default 30.")
	a.Describe(&r.ReadyTimeoutSeconds, "Per member, how long the new pod may take to be at updateRevision and Ready. Default 300.")
	a.Describe(&r.HealthTimeoutSeconds, "Per member, how long etcd may take to call the member healthy and caught up. Default 60.")
	a.Describe(&r.OnFailure, onFailureDoc)
	a.Describe(&r.AcceptPreStopMemberRemoval, acceptPreStopMemberRemovalDoc)
	a.Describe(&r.Kubeconfig, "Kubeconfig path or document. Empty: client-go's default loading rules. Changes are not a diff.")
	a.Describe(&r.Context, "Kubeconfig context to use. Changes are not a diff.")
	a.Describe(&r.Cluster, "Kubeconfig cluster to use. Changes are not a diff.")
	a.Describe(&r.EtcdContainer, "Set by EtcdRollingUpgrade when it owns the StatefulSet: the etcd container (image, command, args, ETCD_* "+
		"variables, as JSON) of the pod template about to be applied, so that preview shows the new template's version path and refuses "+
		"its flags before the StatefulSet changes. Never causes a diff.")
	a.Describe(&r.StsMustExist, "Set by EtcdRollingUpgrade: true when the StatefulSet must already be on the cluster "+
		"(nothing in this update creates it), so a missing one is refused in preview even on the first create. Not a diff.")
	a.Describe(&r.Plan, "Set by the provider: the steps the next rollout will take on the live cluster, in order. "+
		"A value set by a program is replaced.")
}

// RolloutState is what is kept in the Pulumi state: the rollout's target and settings, and what the last run
// did. Cluster credentials are deliberately not part of it.
type RolloutState struct {
	StsName              string  `pulumi:"stsName"`
	Namespace            string  `pulumi:"namespace"`
	ServiceName          string  `pulumi:"serviceName"`
	ClientPort           *int    `pulumi:"clientPort,optional"`
	TLS                  *TLS    `pulumi:"tls,optional"`
	VersionHash          string  `pulumi:"versionHash"`
	CooldownSeconds      *int    `pulumi:"cooldownSeconds,optional"`
	ReadyTimeoutSeconds  *int    `pulumi:"readyTimeoutSeconds,optional"`
	HealthTimeoutSeconds *int    `pulumi:"healthTimeoutSeconds,optional"`
	OnFailure            *string `pulumi:"onFailure,optional"`

	// Plan is what was still to do when the last operation ended: empty after a complete run.
	Plan []string `pulumi:"plan,optional"`

	StatefulSetUID     string   `pulumi:"statefulSetUid"`
	UpdateRevision     string   `pulumi:"updateRevision"`
	MembersRolled      []string `pulumi:"membersRolled"`
	LeaderTransfers    int      `pulumi:"leaderTransfers"`
	UnplannedElections *int     `pulumi:"unplannedElections,optional"`
	FinishedAt         string   `pulumi:"finishedAt"`
	Complete           bool     `pulumi:"complete"`
	// LastFailure is the member that failed its gates in the last run, kept until a run completes, so the
	// next preview names it before anybody re-runs a known-bad template.
	LastFailure *RolloutFailure `pulumi:"lastFailure,optional"`
}

// RolloutFailure records a member that did not pass its gates on a revision.
type RolloutFailure struct {
	Member      string `pulumi:"member"`
	Revision    string `pulumi:"revision"`
	Gate        string `pulumi:"gate"`
	LastSeen    string `pulumi:"lastSeen"`
	At          string `pulumi:"at"`
	RevertedTo  string `pulumi:"revertedTo"`
	RevertError string `pulumi:"revertError"`
}

// Annotate documents RolloutFailure in the schema.
func (f *RolloutFailure) Annotate(a infer.Annotator) {
	a.SetToken("index", "RolloutFailure")
	a.Describe(f, "A member that did not pass its gates on a revision, and what was done about it.")
	a.Describe(&f.Member, "The member's pod.")
	a.Describe(&f.Revision, "The StatefulSet revision it failed on.")
	a.Describe(&f.Gate, `The gate it failed: "pod ready" or "etcd health".`)
	a.Describe(&f.LastSeen, "What was last seen of the member.")
	a.Describe(&f.At, "When (RFC 3339).")
	a.Describe(&f.RevertedTo, "The revision the member was reverted to; empty when it was not reverted.")
	a.Describe(&f.RevertError, "Why the revert was refused or failed (for example past the point of no return); empty otherwise.")
}

// onFailureDoc is shared by the component's and the Rollout's onFailure input.
const onFailureDoc = `What happens to a member that fails its gates on the new revision. "revert" (default): its pod is ` +
	`deleted with the partition locked, so the StatefulSet controller recreates it on the current (old) revision, ` +
	`and the update fails once it is healthy again; refused past the point of no return of a minor-version ` +
	`upgrade. "stop": the member is left as it is for a person to look at.`

// acceptPreStopMemberRemovalDoc is shared by the component's and the Rollout's acceptPreStopMemberRemoval input.
const acceptPreStopMemberRemovalDoc = `Roll pods whose preStop hook removes their own member from etcd when they stop ` +
	`(the Bitnami etcd chart's removeMemberOnContainerTermination; scripts that run etcdctl member remove). Without it ` +
	`such a roll is refused in preview and before anything is touched: every restart would remove a voter with no ` +
	`quorum check, racing the rollout, and the start script would add it back as a voter. Accept it to roll the hook ` +
	`away, or for a hook that removes only members above the initial cluster size. Default false. Never causes a diff.`

// Annotate documents RolloutState in the schema.
func (s *RolloutState) Annotate(a infer.Annotator) {
	a.Describe(&s.Plan, "Steps still to do when the last operation ended; empty after a complete run.")
	a.Describe(&s.StatefulSetUID, "UID of the StatefulSet first rolled; a different one on the resolved cluster is refused.")
	a.Describe(&s.UpdateRevision, "The StatefulSet's updateRevision that every member reached (or was rolling to).")
	a.Describe(&s.MembersRolled, "Pods the last run restarted, in order.")
	a.Describe(&s.LeaderTransfers, "Leader transfers the last run made.")
	a.Describe(&s.UnplannedElections, "Raft term increases during the last run that were not our transfers; absent when the run could not measure them (no raft term read at its start or its end), never a 0 it did not measure.")
	a.Describe(&s.FinishedAt, "When the last complete run finished (RFC 3339); empty if it did not finish.")
	a.Describe(&s.Complete, "True when the last run brought every member to updateRevision and re-locked the partition.")
	a.Describe(&s.LastFailure, "The member that failed its gates in the last run, kept until a run completes; the next preview warns about it.")
}

// Annotate documents the resource.
func (r *Rollout) Annotate(a infer.Annotator) {
	a.SetToken("index", "Rollout")
	a.Describe(r, "Rolls an etcd StatefulSet one member at a time, keeping the Raft leader off the member being "+
		"restarted. Create and Update return when every member is at updateRevision, healthy, and the partition "+
		"is locked again. Usually created by EtcdRollingUpgrade.")
}

// stateFromArgs copies the target and settings into a fresh state.
func stateFromArgs(in RolloutArgs) RolloutState {
	return RolloutState{
		StsName:              in.StsName,
		Namespace:            in.Namespace,
		ServiceName:          in.ServiceName,
		ClientPort:           in.ClientPort,
		TLS:                  in.TLS,
		VersionHash:          in.VersionHash,
		CooldownSeconds:      in.CooldownSeconds,
		ReadyTimeoutSeconds:  in.ReadyTimeoutSeconds,
		HealthTimeoutSeconds: in.HealthTimeoutSeconds,
		OnFailure:            in.OnFailure,
		Plan:                 in.Plan,
	}
}

func (in RolloutArgs) access() ClusterAccess {
	return ClusterAccess{Kubeconfig: deref(in.Kubeconfig), Context: deref(in.Context), Cluster: deref(in.Cluster)}
}

// target names the StatefulSet in messages: <namespace>/<name>.
func (in RolloutArgs) target() string { return in.Namespace + "/" + in.StsName }

func deref[T any](p *T) T {
	var zero T
	if p == nil {
		return zero
	}
	return *p
}
