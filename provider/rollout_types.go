package provider

import (
	"time"

	"github.com/pulumi/pulumi-go-provider/infer"

	"github.com/etcd-rollout/pulumi-etcd-rollout/rollout"
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
	// AcceptWriteOutage rolls a one-member etcd, whose only member's restart stops writes. Never a diff.
	AcceptWriteOutage *bool `pulumi:"acceptWriteOutage,optional"`

	// SnapshotTo and ProceedWithoutSnapshot say where the snapshot before a point of no return goes and
	// whether a roll may go on without one. Never a diff: they change what a run does first, not the cluster.
	SnapshotTo             *string `pulumi:"snapshotTo,optional"`
	ProceedWithoutSnapshot *bool   `pulumi:"proceedWithoutSnapshot,optional"`

	// EtcdContainer is set by EtcdRollingUpgrade when it owns the StatefulSet: the etcd container of the pod
	// template it is about to apply, so that a preview judges the new template's etcd version, flags and probes
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
	a.Describe(&r.AcceptWriteOutage, acceptWriteOutageDoc)
	a.Describe(&r.SnapshotTo, snapshotToDoc)
	a.Describe(&r.ProceedWithoutSnapshot, proceedWithoutSnapshotDoc)
	a.Describe(&r.Kubeconfig, "Kubeconfig path or document. Empty: client-go's default loading rules. Changes are not a diff.")
	a.Describe(&r.Context, "Kubeconfig context to use. Changes are not a diff.")
	a.Describe(&r.Cluster, "Kubeconfig cluster to use. Changes are not a diff.")
	a.Describe(&r.EtcdContainer, "Set by EtcdRollingUpgrade when it owns the StatefulSet: the etcd container (image, command, args, plain ETCD_* "+
		"variables, and its probes without HTTP headers, as JSON) of the pod template about to be applied, so that preview shows the new "+
		"template's version path, refuses its flags and warns about its probes before the StatefulSet changes. Never causes a diff.")
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
	// Snapshot is the last snapshot a run stored before its first restart, kept until a later run stores
	// another; SnapshotSkipped is why the last run went on without one it needed (proceedWithoutSnapshot).
	Snapshot        *RolloutSnapshot `pulumi:"snapshot,optional"`
	SnapshotSkipped *string          `pulumi:"snapshotSkipped,optional"`
	// WriteOutage is what the last restart of a one-member etcd's only member cost, kept until a later run
	// measures another.
	WriteOutage *RolloutWriteOutage `pulumi:"writeOutage,optional"`
}

// RolloutWriteOutage is the measured write outage of a one-member etcd's restart (rollout.WriteOutage).
type RolloutWriteOutage struct {
	Pod string `pulumi:"pod"`
	// Seconds is from the last successful linearizable read before the restart to the first after it.
	Seconds        float64 `pulumi:"seconds"`
	LastReadBefore string  `pulumi:"lastReadBefore"`
	FirstReadAfter string  `pulumi:"firstReadAfter,optional"`
	Back           bool    `pulumi:"back"`
	// PrecisionSeconds is the interval between reads once the pod was recreated.
	PrecisionSeconds float64 `pulumi:"precisionSeconds"`
	// Elections is the elections the restart cost (1: the only member campaigns when it starts); absent when
	// its term after could not be read.
	Elections *int `pulumi:"elections,optional"`
}

// Annotate documents RolloutWriteOutage in the schema.
func (o *RolloutWriteOutage) Annotate(a infer.Annotator) {
	a.Describe(&o.Pod, "The only member, restarted.")
	a.Describe(&o.Seconds, "The write outage: from the last successful linearizable read before the restart to the first one after it "+
		"(when back is false, the outage so far when the run stopped measuring).")
	a.Describe(&o.LastReadBefore, "When the last successful linearizable read before the restart returned (RFC 3339, nanoseconds).")
	a.Describe(&o.FirstReadAfter, "When the first successful linearizable read after it returned; absent when the member was not back.")
	a.Describe(&o.Back, "True when a read succeeded after the restart before the run stopped measuring.")
	a.Describe(&o.PrecisionSeconds, "The interval between reads once the pod was recreated: the outage is known to within it.")
	a.Describe(&o.Elections, "Raft elections the restart cost (the only member campaigns when it starts: 1), not counted as unplanned; absent when not read.")
}

// newRolloutWriteOutage is o as the state keeps it.
func newRolloutWriteOutage(o *rollout.WriteOutage) *RolloutWriteOutage {
	out := &RolloutWriteOutage{Pod: o.Pod, Seconds: o.Duration.Seconds(), LastReadBefore: o.LastReadBefore.UTC().Format(time.RFC3339Nano),
		Back: o.Back, PrecisionSeconds: o.Precision.Seconds()}
	if o.Back {
		out.FirstReadAfter = o.FirstReadAfter.UTC().Format(time.RFC3339Nano)
	}
	if o.Elections >= 0 {
		elections := o.Elections
		out.Elections = &elections
	}
	return out
}

// RolloutSnapshot is a stored, verified snapshot, as its record next to it says. Its location carries no
// secret: a destination with a credential is refused.
type RolloutSnapshot struct {
	Location       string `pulumi:"location"`
	Member         string `pulumi:"member"`
	EtcdVersion    string `pulumi:"etcdVersion"`
	StorageVersion string `pulumi:"storageVersion"`
	Revision       int    `pulumi:"revision"`
	SizeBytes      int    `pulumi:"sizeBytes"`
	Sha256         string `pulumi:"sha256"`
	TakenAt        string `pulumi:"takenAt"`
}

// Annotate documents RolloutSnapshot in the schema.
func (s *RolloutSnapshot) Annotate(a infer.Annotator) {
	a.SetToken("index", "RolloutSnapshot")
	a.Describe(s, "A snapshot stored and verified before the rollout's first restart (etcd's sha256, bbolt's check, read back from its destination).")
	a.Describe(&s.Location, "Where it is stored (file:///…, s3://…); its record is the same name with .json appended.")
	a.Describe(&s.Member, "The member it was taken through: the leader when it was taken.")
	a.Describe(&s.EtcdVersion, "That member's etcd version.")
	a.Describe(&s.StorageVersion, "The storage version the snapshot records; empty for one written before etcd 3.6.")
	a.Describe(&s.Revision, "The newest revision of the key-value store it holds.")
	a.Describe(&s.SizeBytes, "Its size in bytes.")
	a.Describe(&s.Sha256, "The sha256 of the whole file, as sha256sum prints it.")
	a.Describe(&s.TakenAt, "When it was taken (RFC 3339).")
}

// newRolloutSnapshot is the state's copy of a snapshot record.
func newRolloutSnapshot(rec *rollout.SnapshotRecord) *RolloutSnapshot {
	if rec == nil {
		return nil
	}
	return &RolloutSnapshot{Location: rec.Location, Member: rec.Member, EtcdVersion: rec.EtcdVersion, StorageVersion: rec.StorageVersion,
		Revision: int(rec.Revision), SizeBytes: int(rec.Size), Sha256: rec.SHA256, TakenAt: rec.TakenAt.Format(time.RFC3339)}
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

// acceptWriteOutageDoc is shared by the component's and the Rollout's acceptWriteOutage input.
const acceptWriteOutageDoc = `Roll a one-member etcd (spec.replicas 1). Its only member's restart stops every read and write until it ` +
	`is back (quorum 1 of 1), so without this such a rollout is refused in preview and before anything is touched. With it ` +
	`the rollout stores a verified snapshot first (snapshotTo; always, whatever proceedWithoutSnapshot says), restarts the ` +
	`member, waits for etcd's usual gates, and reports the measured outage (the Rollout's writeOutage output, the update's ` +
	`summary, the status ConfigMap). Never for a member whose data dies with its pod. Default false. Never causes a diff.`

// snapshotToDoc is shared by the component's and the Rollout's snapshotTo input.
const snapshotToDoc = `Where a rollout stores the verified snapshot it takes from the leader before a point of no return: the first ` +
	`restart of a minor-version change (3.5 → 3.6, or a downgrade), the only way back once the cluster version moves, and the ` +
	`restart of a one-member etcd's only member (acceptWriteOutage). A directory on ` +
	`the machine running pulumi (a path or file:///path; files 0600 in 0700 directories), or s3://bucket, gs://bucket, ` +
	`azblob://container with gocloud.dev's URL options (region, endpoint, prefix, ssetype). Credentials come from the store's ` +
	`usual sources (environment, workload identity, its config files); a URL that carries one is refused. Default: ` +
	`$XDG_STATE_HOME/etcd-rollout/snapshots, or ~/.local/state/etcd-rollout/snapshots. Never causes a diff.`

// proceedWithoutSnapshotDoc is shared by the component's and the Rollout's proceedWithoutSnapshot input.
const proceedWithoutSnapshotDoc = `Let a rollout that changes etcd's minor version go on when its snapshot fails (the ` +
	`Rollout's snapshotSkipped output and the update's summary say why). Without it such a rollout stops before its first restart. Default false. Never causes a diff.`

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
	a.Describe(&s.Snapshot, "The last snapshot a run stored before its first restart (a minor-version change), kept until a later run stores another: the rollback path.")
	a.Describe(&s.WriteOutage, "What the last restart of a one-member etcd's only member cost (acceptWriteOutage), kept until a later run measures another.")
	a.Describe(&s.SnapshotSkipped, "Why the last run went on without a snapshot it needed (proceedWithoutSnapshot); absent when it did not.")
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
