package provider

import (
	"github.com/pulumi/pulumi-go-provider/infer"
	"github.com/pulumi/pulumi/sdk/v3/go/pulumi"
)

// jobDeprecation is the schema's deprecation message of the component's job output.
const jobDeprecation = "job is kept so that code written against the Job-based class (dependsOn: [upgrade.job]) " +
	"keeps compiling and running: it is now the Rollout resource that does the work, which a dependency waits " +
	"for exactly as it waited for the Job. Depend on the component itself instead; to know that a rollout " +
	"finished, read the component's outputs (updateRevision, membersRolled, finishedAt) or wait for the status " +
	"ConfigMap <stsName>-etcd-rollout-status on the cluster."

// EtcdRollingUpgradeArgs are the component's inputs: exactly the old TypeScript class's, so existing call
// sites compile with only the import changed, plus cluster access (kubeconfig, context) and an optional
// StatefulSet manifest for the component to own.
type EtcdRollingUpgradeArgs struct {
	StsName              pulumi.StringInput `pulumi:"stsName"`
	Namespace            pulumi.StringInput `pulumi:"namespace"`
	ServiceName          pulumi.StringInput `pulumi:"serviceName"`
	ClientPort           pulumi.IntInput    `pulumi:"clientPort,optional"`
	TLS                  *TLS               `pulumi:"tls,optional"`
	VersionHash          pulumi.StringInput `pulumi:"versionHash,optional"`
	CooldownSeconds      pulumi.IntInput    `pulumi:"cooldownSeconds,optional"`
	ReadyTimeoutSeconds  pulumi.IntInput    `pulumi:"readyTimeoutSeconds,optional"`
	HealthTimeoutSeconds pulumi.IntInput    `pulumi:"healthTimeoutSeconds,optional"`
	OnFailure            pulumi.StringInput `pulumi:"onFailure,optional"`
	// AcceptPreStopMemberRemoval: see acceptPreStopMemberRemovalDoc.
	AcceptPreStopMemberRemoval pulumi.BoolInput `pulumi:"acceptPreStopMemberRemoval,optional"`
	// AcceptWriteOutage: see acceptWriteOutageDoc.
	AcceptWriteOutage pulumi.BoolInput `pulumi:"acceptWriteOutage,optional"`
	// SnapshotTo, ProceedWithoutSnapshot: see snapshotToDoc, proceedWithoutSnapshotDoc.
	SnapshotTo             pulumi.StringInput `pulumi:"snapshotTo,optional"`
	ProceedWithoutSnapshot pulumi.BoolInput   `pulumi:"proceedWithoutSnapshot,optional"`
	DependsOnSts           pulumi.AnyOutput   `pulumi:"dependsOnSts,optional"`

	Kubeconfig  pulumi.StringInput `pulumi:"kubeconfig,optional" provider:"secret"`
	Context     pulumi.StringInput `pulumi:"context,optional"`
	StatefulSet pulumi.MapInput    `pulumi:"statefulSet,optional"`
}

// Annotate documents the component's inputs in the schema.
func (a *EtcdRollingUpgradeArgs) Annotate(an infer.Annotator) {
	an.Describe(&a.StsName, "Name of the etcd StatefulSet.")
	an.Describe(&a.Namespace, "Namespace of the StatefulSet.")
	an.Describe(&a.ServiceName, "The StatefulSet's governing (headless) Service.")
	an.Describe(&a.ClientPort, "etcd client port on each pod. Default 2379.")
	an.Describe(&a.TLS, "Client TLS files as mounted inside the etcd container; all three or none. Plain HTTP when absent.")
	an.Describe(&a.VersionHash, "A value that changes whenever the pod template changes; a change rolls the members. "+
		"Required unless statefulSet is given, in which case it defaults to a hash of the pod template.")
	an.Describe(&a.CooldownSeconds, "Pause after each member passes its health gate. Default 30.")
	an.Describe(&a.ReadyTimeoutSeconds, "Per member, how long the new pod may take to be at updateRevision and Ready. Default 300.")
	an.Describe(&a.HealthTimeoutSeconds, "Per member, how long etcd may take to call the member healthy and caught up. Default 60.")
	an.Describe(&a.OnFailure, onFailureDoc)
	an.Describe(&a.AcceptPreStopMemberRemoval, acceptPreStopMemberRemovalDoc)
	an.Describe(&a.AcceptWriteOutage, acceptWriteOutageDoc)
	an.Describe(&a.SnapshotTo, snapshotToDoc)
	an.Describe(&a.ProceedWithoutSnapshot, proceedWithoutSnapshotDoc)
	an.Describe(&a.DependsOnSts, "The resource that applies the StatefulSet (any resource); the rollout runs after it.")
	an.Describe(&a.Kubeconfig, "Kubeconfig path or document, used when no kubernetes provider is passed in the resource "+
		"options. Without either, the rollout uses what the default kubernetes provider uses: the stack config "+
		"kubernetes:kubeconfig, kubernetes:context and kubernetes:cluster, then client-go's default loading rules "+
		"($KUBECONFIG, ~/.kube/config).")
	an.Describe(&a.Context, "Kubeconfig context, used with kubeconfig or, without it, instead of kubernetes:context.")
	an.Describe(&a.StatefulSet, "A StatefulSet manifest (apiVersion apps/v1). When given, the component creates it as its "+
		"own child with the annotations pulumi.com/skipAwait: \"true\" and pulumi.com/patchForce: \"true\" (so its next "+
		"apply re-locks whatever a killed run left) and updateStrategy.rollingUpdate.partition = "+
		"spec.replicas forced, and computes versionHash from spec.template when none is given.")
}

// EtcdRollingUpgrade is the multi-language component: a drop-in for the old TypeScript class.
type EtcdRollingUpgrade struct {
	pulumi.ResourceState

	VersionHash     pulumi.StringOutput      `pulumi:"versionHash"`
	UpdateRevision  pulumi.StringOutput      `pulumi:"updateRevision"`
	MembersRolled   pulumi.StringArrayOutput `pulumi:"membersRolled"`
	LeaderTransfers pulumi.IntOutput         `pulumi:"leaderTransfers"`
	// UnplannedElections is absent when the rollout could not measure it, yet its tag has no ",optional":
	// pulumi-go-provider v1.5.0 registers a component's outputs under the whole tag (introspect.StructToMap),
	// which would name the output "unplannedElections,optional". The schema keeps it an integer.
	UnplannedElections pulumi.IntPtrOutput `pulumi:"unplannedElections"`
	FinishedAt         pulumi.StringOutput `pulumi:"finishedAt"`
	// Snapshot is the Rollout's snapshot output (location, sha256, sizeBytes, revision, storageVersion,
	// member, etcdVersion, takenAt): the last snapshot stored before a minor-version change's first restart.
	Snapshot pulumi.MapOutput `pulumi:"snapshot"`
	// WriteOutage is the Rollout's writeOutage output (pod, seconds, lastReadBefore, firstReadAfter, back,
	// precisionSeconds, elections): what the last restart of a one-member etcd's only member cost.
	WriteOutage pulumi.MapOutput `pulumi:"writeOutage"`

	// Job is the old class's public job member, now the Rollout child (see jobDeprecation).
	Job rolloutReference `pulumi:"job"`
}

// Annotate documents the component.
func (c *EtcdRollingUpgrade) Annotate(a infer.Annotator) {
	a.SetToken("index", "EtcdRollingUpgrade")
	a.Describe(c, "Rolls an etcd StatefulSet member by member with no uncontrolled Raft leader elections: the leader is "+
		"moved off each member before it restarts, one member is disrupted at a time, and the next waits until etcd "+
		"says the last one is healthy and caught up. The StatefulSet stays partition-locked so a template change "+
		"rolls nothing by itself.")
	a.Describe(&c.VersionHash, "The versionHash the rollout ran for (computed from the pod template when not given).")
	a.Describe(&c.UpdateRevision, "The StatefulSet's updateRevision every member is at after the rollout.")
	a.Describe(&c.MembersRolled, "Pods the last rollout restarted, in order.")
	a.Describe(&c.LeaderTransfers, "Leader transfers the last rollout made.")
	a.Describe(&c.UnplannedElections, "Raft term increases during the last rollout that were not our transfers; absent when the rollout could not measure them, never a 0 it did not measure.")
	a.Describe(&c.FinishedAt, "When the last complete rollout finished (RFC 3339).")
	a.Describe(&c.Snapshot, "The last snapshot a rollout stored before the first restart of a minor-version change (or the restart of a one-member etcd's only member), kept "+
		"until a later one stores another: location, sha256, sizeBytes, revision, storageVersion, member, etcdVersion, takenAt. "+
		"Empty when no rollout needed one.")
	a.Describe(&c.WriteOutage, "What the last restart of a one-member etcd's only member cost (acceptWriteOutage), kept until a "+
		"later rollout measures another: pod, seconds (last successful linearizable read before the restart to the first after it), "+
		"lastReadBefore, firstReadAfter, back, precisionSeconds, elections. Empty when no rollout restarted such a member.")
	a.Describe(&c.Job, "The Rollout resource that runs the rollout: what the Job-based class's job member was.")
	a.Deprecate(&c.Job, jobDeprecation)
}

// rolloutResource is the Go SDK handle for the child Rollout the component registers.
type rolloutResource struct {
	pulumi.CustomResourceState

	VersionHash        pulumi.StringOutput      `pulumi:"versionHash"`
	UpdateRevision     pulumi.StringOutput      `pulumi:"updateRevision"`
	MembersRolled      pulumi.StringArrayOutput `pulumi:"membersRolled"`
	LeaderTransfers    pulumi.IntOutput         `pulumi:"leaderTransfers"`
	UnplannedElections pulumi.IntPtrOutput      `pulumi:"unplannedElections"`
	FinishedAt         pulumi.StringOutput      `pulumi:"finishedAt"`
	Snapshot           pulumi.MapOutput         `pulumi:"snapshot"`
	WriteOutage        pulumi.MapOutput         `pulumi:"writeOutage"`
}
