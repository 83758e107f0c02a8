package progress

import (
	"encoding/json"
	"strconv"
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// StatusConfigMapName is the ConfigMap where a rollout of sts publishes its status.
//
// Why a ConfigMap of its own, and one data key per condition: GitOps tools, dashboards and `kubectl wait`
// cannot read Pulumi state, and `kubectl wait --for=jsonpath=...` compares one scalar the expression
// reaches. A key per condition makes the clean line
//
//	kubectl wait --for=jsonpath='{.data.MembersUpdated}'=True configmap/<sts>-etcd-rollout-status --timeout=10m
//
// possible, while the same conditions in the usual metav1.Condition shape (type, status, reason, message,
// lastTransitionTime) sit in the "conditions" key as JSON for tools that parse them. The StatefulSet is
// Pulumi's (a status field there would be a perpetual diff, or lost on the next apply), and the rollout
// Lease is written by renewals that are conditional on its resourceVersion: a status write there would make
// them conflict, and an annotation holding JSON is out of jsonpath's reach. The ConfigMap carries an owner
// reference to the StatefulSet, so it goes when the StatefulSet goes.
func StatusConfigMapName(sts string) string { return sts + "-etcd-rollout-status" }

// Condition types of the rollout status. MembersUpdated is the name etcd-druid uses for the same signal.
const (
	// ConditionProgressing is True while a run rolls the StatefulSet, False once it ended either way.
	ConditionProgressing = "Progressing"
	// ConditionMembersUpdated is True only when a run finished with every member at its target revision,
	// healthy and the partition locked; a run that starts sets it False, so it never claims completion of
	// a rollout still under way.
	ConditionMembersUpdated = "MembersUpdated"
	// ConditionFailed is True when the last run failed (reason: the Warning event's reason).
	ConditionFailed = "Failed"
)

// Reasons of the status conditions that are not Event reasons.
const (
	StatusReasonProgressing = "RolloutProgressing"
	StatusReasonComplete    = "RolloutComplete"
	StatusReasonFailed      = "RolloutFailed"
	StatusReasonRolling     = "MembersRolling"
	StatusReasonAllUpdated  = "AllMembersUpdated"
)

// Data keys of the status ConfigMap besides one key per condition type (whose value is its status).
const (
	StatusKeyConditions     = "conditions"
	StatusKeyTargetRevision = "targetRevision"
	StatusKeyMembersDone    = "membersDone"
	StatusKeyMembers        = "members"
	StatusKeyPending        = "pendingMembers"
	StatusKeyStep           = "step"
	StatusKeyMessage        = "message"
	StatusKeyRun            = "run"
	StatusKeyUpdatedAt      = "updatedAt"
	// StatusKeyTemplateVersion is the caller's name for the template of targetRevision (Config.TemplateVersion).
	StatusKeyTemplateVersion = "templateVersion"
	// StatusKeySnapshot is where the last snapshot a run stored before a point of no return is (its location).
	StatusKeySnapshot = "snapshot"
	// StatusKeyWriteOutage is the measured write outage of the last one-member restart (Result.WriteOutage).
	StatusKeyWriteOutage = "writeOutage"
)

// RolloutStatus is the status a rollout published, as read back from its ConfigMap.
type RolloutStatus struct {
	Conditions     []metav1.Condition
	TargetRevision string
	// TemplateVersion is the caller's name for TargetRevision's template (Config.TemplateVersion); empty when
	// the run had none.
	TemplateVersion string
	// MembersDone counts members at TargetRevision that passed their gates; -1 when not known yet.
	MembersDone int
	// Members is the StatefulSet's member count; -1 when not known yet.
	Members        int
	PendingMembers []string
	// Step is the current step ("wait-member etcd-1"), Message the latest progress line.
	Step, Message string
	// Run is the identity of the run that wrote it (RunIdentity).
	Run       string
	UpdatedAt time.Time
	// Snapshot is the location of the last snapshot a run stored before a point of no return; empty when none.
	Snapshot string
	// WriteOutage is the measured write outage of the last one-member restart, in words; empty when none.
	WriteOutage string
}

// Reasons of the Kubernetes Events the engine records on the StatefulSet.
const (
	ReasonMemberRolled      = "EtcdMemberRolled"
	ReasonLeaderTransferred = "EtcdLeaderTransferred"
	ReasonRolloutFailed     = "EtcdRolloutFailed"
	ReasonRolloutDone       = "EtcdRolloutComplete"
	ReasonMemberReverted    = "EtcdMemberReverted"
)

// ParseStatus reads the data of a status ConfigMap (StatusConfigMapName).
func ParseStatus(data map[string]string) RolloutStatus {
	st := RolloutStatus{TargetRevision: data[StatusKeyTargetRevision], TemplateVersion: data[StatusKeyTemplateVersion], Step: data[StatusKeyStep],
		Message: data[StatusKeyMessage], Run: data[StatusKeyRun], MembersDone: -1, Members: -1, Snapshot: data[StatusKeySnapshot],
		WriteOutage: data[StatusKeyWriteOutage]}
	_ = json.Unmarshal([]byte(data[StatusKeyConditions]), &st.Conditions)
	if n, err := strconv.Atoi(data[StatusKeyMembersDone]); err == nil {
		st.MembersDone = n
	}
	if n, err := strconv.Atoi(data[StatusKeyMembers]); err == nil {
		st.Members = n
	}
	if p := data[StatusKeyPending]; p != "" {
		st.PendingMembers = strings.Split(p, ",")
	}
	st.UpdatedAt, _ = time.Parse(time.RFC3339, data[StatusKeyUpdatedAt])
	return st
}
