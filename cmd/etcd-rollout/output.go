package main

import (
	"encoding/json"
	"fmt"
	"io"
	"time"

	"sigs.k8s.io/yaml"

	"github.com/etcd-rollout/pulumi-etcd-rollout/rollout"
)

// outputAPIVersion versions the machine-readable documents of `status -o` and `plan -o`. Fields are only ever
// added under it; a rename or a removal makes a new version.
const outputAPIVersion = "etcd-rollout/v1"

// outputFormat is the value of -o/--output: text (the tables, for people), json or yaml (the documents below,
// for scripts).
type outputFormat string

const (
	outputText outputFormat = "text"
	outputJSON outputFormat = "json"
	outputYAML outputFormat = "yaml"
)

// Set, String and Type make outputFormat a pflag.Value, so a bad value is a usage error before anything runs.
func (f *outputFormat) Set(v string) error {
	switch outputFormat(v) {
	case outputText, outputJSON, outputYAML:
		*f = outputFormat(v)
		return nil
	}
	return fmt.Errorf("want text, json or yaml, not %q", v)
}
func (f *outputFormat) String() string { return string(*f) }
func (f *outputFormat) Type() string   { return "text|json|yaml" }

// docHead opens both documents: what they are, and the cluster as observed.
type docHead struct {
	APIVersion  string         `json:"apiVersion"`
	Kind        string         `json:"kind"` // "Status" or "Plan"
	StatefulSet statefulSetDoc `json:"statefulSet"`
	Members     []memberDoc    `json:"members"`
}

// newDocHead is the head of a document of kind about st.
func newDocHead(kind string, cfg rollout.Config, st rollout.ClusterState) docHead {
	return docHead{APIVersion: outputAPIVersion, Kind: kind, StatefulSet: newStatefulSetDoc(cfg, st), Members: newMemberDocs(st)}
}

// statusDoc is `status -o json|yaml`: the StatefulSet, each member, the rollout Lease, and the trust each
// member's etcd process started with (TLS clusters).
type statusDoc struct {
	docHead
	Lease leaseDoc              `json:"lease"`
	Trust []rollout.MemberTrust `json:"trust,omitempty"`
}

// planDoc is `plan -o json|yaml`: the cluster as observed and what a run would do now; Blocked says why it
// would do nothing (the command then exits 3).
type planDoc struct {
	docHead
	Summary   string    `json:"summary"`
	Roll      []string  `json:"roll"`
	Steps     []stepDoc `json:"steps"`
	Transfers int       `json:"leaderTransfers"`
	Blocked   string    `json:"blocked,omitempty"`
	// Snapshot is where the snapshot before the first step goes, when the plan takes one.
	Snapshot string `json:"snapshotTo,omitempty"`
	// WriteOutage names the only member of a one-member etcd whose restart stops writes (--accept-write-outage).
	WriteOutage string `json:"writeOutageOf,omitempty"`
	// ProbeWarnings are the etcd container's probe shapes that turn a roll's hiccup into an outage.
	ProbeWarnings []probeWarningDoc `json:"probeWarnings,omitempty"`
}

// probeWarningDoc is one ProbeFinding: its kind, the probe, and the line preview prints.
type probeWarningDoc struct {
	Kind    string `json:"kind"`
	Probe   string `json:"probe"`
	Warning string `json:"warning"`
}

type statefulSetDoc struct {
	Namespace       string `json:"namespace"`
	Name            string `json:"name"`
	Replicas        int    `json:"replicas"`
	Partition       int    `json:"partition"` // -1: not RollingUpdate
	Locked          bool   `json:"locked"`    // partition >= replicas
	UpdateRevision  string `json:"updateRevision"`
	CurrentRevision string `json:"currentRevision"`
	ClusterVersion  string `json:"clusterVersion"` // "" when no member said
	VotingMembers   int    `json:"votingMembers"`
	Learners        int    `json:"learners"`
}

type memberDoc struct {
	Name           string `json:"name"`
	Ordinal        int    `json:"ordinal"`
	Revision       string `json:"revision"`
	Updated        bool   `json:"updated"`
	Ready          bool   `json:"ready"`
	Etcd           string `json:"etcd"`           // healthy, unhealthy (answers, not healthy) or down (does not answer us)
	Version        string `json:"version"`        // the member's own word; "" when it does not answer
	StorageVersion string `json:"storageVersion"` // etcd 3.6 and later
	Leader         bool   `json:"leader"`
	Learner        bool   `json:"learner"`
	RaftTerm       uint64 `json:"raftTerm"`
	RaftIndex      uint64 `json:"raftIndex"`
	AppliedIndex   uint64 `json:"appliedIndex"`
	Problem        string `json:"problem,omitempty"`
	// Data and Procedure (plan only): how long the member's data lives (a durability kind, "DiesWithPod") and
	// how a roll takes it ("restart" or "replace").
	Data      string `json:"data,omitempty"`
	Procedure string `json:"procedure,omitempty"`
}

type leaseDoc struct {
	Name   string `json:"name"`
	State  string `json:"state"` // free, held or stale
	Holder string `json:"holder,omitempty"`
	// ValidForSeconds is how long a held Lease stays valid without renewal.
	ValidForSeconds int `json:"validForSeconds,omitempty"`
}

type stepDoc struct {
	Kind   string `json:"kind"` // a rollout.StepKind
	Member string `json:"member,omitempty"`
	// From and To are a leader transfer's members.
	From    string `json:"from,omitempty"`
	To      string `json:"to,omitempty"`
	Version string `json:"version,omitempty"` // a downgrade step's target minor
}

func newStatefulSetDoc(cfg rollout.Config, st rollout.ClusterState) statefulSetDoc {
	return statefulSetDoc{Namespace: cfg.Namespace, Name: cfg.StatefulSet, Replicas: st.Replicas, Partition: st.Partition,
		Locked: st.Partition >= st.Replicas, UpdateRevision: st.UpdateRevision, CurrentRevision: st.CurrentRevision,
		ClusterVersion: st.ClusterVersion, VotingMembers: st.VotingMembers, Learners: st.Learners}
}

// etcdHealth is a member's etcd by our looks: healthy, unhealthy (it answers, but is not healthy) or down (it
// does not answer us).
func etcdHealth(m rollout.MemberState) string {
	switch {
	case m.Healthy:
		return "healthy"
	case m.Reachable:
		return "unhealthy"
	}
	return "down"
}

func newMemberDocs(st rollout.ClusterState) []memberDoc {
	docs := make([]memberDoc, 0, len(st.Members))
	for _, m := range st.Members {
		docs = append(docs, memberDoc{Name: m.Pod, Ordinal: m.Ordinal, Revision: m.Revision, Updated: m.Revision == st.UpdateRevision,
			Ready: m.Ready, Etcd: etcdHealth(m), Version: m.ServerVersion, StorageVersion: m.StorageVersion, Leader: m.IsLeader,
			Learner: m.IsLearner, RaftTerm: m.RaftTerm, RaftIndex: m.RaftIndex, AppliedIndex: m.AppliedIndex, Problem: oneLine(m.Problem)})
	}
	return docs
}

func newLeaseDoc(sts, holder string, expiresIn time.Duration) leaseDoc {
	d := leaseDoc{Name: rollout.LeaseName(sts), State: "free", Holder: holder}
	switch {
	case holder == "":
	case expiresIn > 0:
		d.State, d.ValidForSeconds = "held", int(expiresIn.Round(time.Second)/time.Second)
	default:
		d.State = "stale"
	}
	return d
}

func newPlanDoc(cfg rollout.Config, st rollout.ClusterState, p rollout.Plan, planErr error) planDoc {
	d := planDoc{docHead: newDocHead("Plan", cfg, st), Summary: p.String(), Roll: []string{}, Steps: []stepDoc{}, Transfers: p.Transfers}
	if planErr != nil {
		d.Blocked = oneLine(planErr.Error())
	}
	if p.Snapshot != nil {
		d.Snapshot = p.Snapshot.To
	}
	if p.WriteOutage != nil {
		d.WriteOutage = p.WriteOutage.Pod
	}
	for _, w := range st.ProbeWarnings {
		d.ProbeWarnings = append(d.ProbeWarnings, probeWarningDoc{Kind: string(w.Kind), Probe: w.Probe, Warning: w.String()})
	}
	pod := func(ordinal int) string {
		if ordinal >= 0 && ordinal < len(st.Members) {
			return st.Members[ordinal].Pod
		}
		return ""
	}
	for _, o := range p.Roll {
		d.Roll = append(d.Roll, pod(o))
	}
	for i, m := range p.Members {
		if i < len(d.Members) && d.Members[i].Name == m.Pod {
			d.Members[i].Data, d.Members[i].Procedure = m.Data, string(m.Procedure)
		}
	}
	for _, s := range p.Steps {
		step := stepDoc{Kind: string(s.Kind), Version: s.Version}
		switch s.Kind {
		case rollout.StepTransferLeader:
			step.From, step.To = pod(s.From), pod(s.To)
		case rollout.StepLock, rollout.StepRelock, rollout.StepCooldown, rollout.StepEnableDowngrade:
		default:
			step.Member = pod(s.Ordinal)
		}
		d.Steps = append(d.Steps, step)
	}
	return d
}

// writeDoc writes doc as JSON (indented) or YAML.
func writeDoc(out io.Writer, format outputFormat, doc any) error {
	b, err := json.MarshalIndent(doc, "", "  ")
	if err != nil {
		return err
	}
	if format == outputYAML {
		if b, err = yaml.JSONToYAML(b); err != nil {
			return err
		}
	} else {
		b = append(b, '\n')
	}
	_, err = out.Write(b)
	return err
}
