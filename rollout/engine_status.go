package rollout

import (
	"context"
	"crypto/x509"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/etcd-rollout/pulumi-etcd-rollout/rollout/internal/member"
	"github.com/etcd-rollout/pulumi-etcd-rollout/rollout/internal/podfile"
	"github.com/etcd-rollout/pulumi-etcd-rollout/rollout/internal/trust"
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

// RolloutStatus reads the status the last rollout published; found is false when none ever did.
func (e *Engine) RolloutStatus(ctx context.Context) (st RolloutStatus, found bool, err error) {
	name := StatusConfigMapName(e.cfg.StatefulSet)
	cm, err := e.kube.CoreV1().ConfigMaps(e.cfg.Namespace).Get(ctx, name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return RolloutStatus{}, false, nil
	}
	if err != nil {
		return RolloutStatus{}, false, fmt.Errorf("reading rollout status configmap %s/%s: %w", e.cfg.Namespace, name, err)
	}
	return ParseStatus(cm.Data), true, nil
}

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

// Timing of the status writes.
const (
	// statusWriteTimeout bounds one write; a status write never holds the rollout up for longer.
	statusWriteTimeout = 5 * time.Second
	// statusMinInterval paces the background writes: progress lines come in bursts, and a burst becomes
	// one write of its last state instead of one per line. A second is as fresh as a person or a dashboard
	// reads it, and keeps the writes (the largest share of a rollout's API requests at 250 ms: 12 of ~57)
	// near one per second; outcomes are written at once whatever the pacing (flushNow).
	statusMinInterval = time.Second
	// statusTextLimit caps the messages published: they are for a person glancing at a dashboard.
	statusTextLimit = 1000
)

// MemberTrust is the trust one member's etcd process started with, as its TLS listeners announce it: etcd
// loads its trusted CAs only when it starts, so this is what a restart changes, and what a CA rotation's
// passes must bring every member to before the next (issue 33). Peer and Client are nil for a listener the
// template does not serve with client certificates.
type MemberTrust struct {
	Pod          string
	Peer, Client *ListenerTrust
}

// ListenerTrust is one listener's announced trust.
type ListenerTrust struct {
	// CAs are the CAs the process accepts client certificates from, each with the fingerprints of the
	// template trust file's CAs of that name (TrustFile, as the pod mounts it now).
	CAs            []AnnouncedCA
	AsksClientCert bool
	TrustFile      string
	// ServedIssuer and ServedNotAfter describe the certificate the listener serves now.
	ServedIssuer   string
	ServedNotAfter time.Time
	// Err says why the listener could not be seen (the member down, a trust file that cannot be read).
	Err string
}

// AnnouncedCA is one CA a member announces it trusts (rollout/internal/trust).
type AnnouncedCA = trust.AnnouncedCA

// trustSeer reads what a member's TLS listener announces (member.Clients).
type trustSeer interface {
	SeeTrust(ctx context.Context, pod string, port int) (member.TrustSeen, error)
}

// MemberTrust reads, for each member whose pod exists, the CAs its peer and client listeners announce, and
// matches them with the template's trust files. It changes nothing and presents no certificate.
func (e *Engine) MemberTrust(ctx context.Context, st ClusterState) []MemberTrust {
	seer, ok := e.etcd.(trustSeer)
	if !ok || st.PodTemplate == nil {
		return nil
	}
	c := EtcdContainer(st.PodTemplate.Containers)
	flags := EtcdFlagValues(c)
	peerPort := 2380
	for _, p := range c.Ports {
		if p.Name == "peer" {
			peerPort = int(p.ContainerPort)
		}
	}
	files := e.podFiles.Memo()
	var out []MemberTrust
	for _, m := range st.Members {
		if !m.PodExists {
			continue
		}
		mt := MemberTrust{Pod: m.Pod}
		if flags["peer-trusted-ca-file"] != "" || flags["peer-cert-file"] != "" {
			mt.Peer = e.listenerTrust(ctx, seer, files, st.PodTemplate, c, m.Pod, peerPort, flags["peer-trusted-ca-file"])
		}
		if e.cfg.TLS != nil {
			mt.Client = e.listenerTrust(ctx, seer, files, st.PodTemplate, c, m.Pod, e.cfg.ClientPort, flags["trusted-ca-file"])
		}
		out = append(out, mt)
	}
	return out
}

// listenerTrust sees one listener and matches what it announces with the trust file's CAs.
func (e *Engine) listenerTrust(ctx context.Context, seer trustSeer, files *podfile.Memo, spec *corev1.PodSpec, c *corev1.Container,
	pod string, port int, trustFile string) *ListenerTrust {
	lt := &ListenerTrust{TrustFile: trustFile}
	seen, err := seer.SeeTrust(ctx, pod, port)
	if err != nil {
		lt.Err = err.Error()
		return lt
	}
	lt.AsksClientCert = seen.AsksClientCert
	lt.ServedIssuer, lt.ServedNotAfter = seen.Served[0].Issuer.String(), seen.Served[0].NotAfter
	var cas []*x509.Certificate
	if trustFile != "" {
		pemBytes, _, err := files.Read(ctx, spec, c, trustFile)
		if err == nil {
			cas, err = trust.ParseCAs(pemBytes)
		}
		if err != nil {
			lt.Err = fmt.Sprintf("trust file %s: %v", trustFile, err)
		}
	}
	lt.CAs = trust.Announced(seen.AcceptableCAs, cas)
	return lt
}

// Reasons of the Kubernetes Events the engine records on the StatefulSet.
const (
	ReasonMemberRolled      = "EtcdMemberRolled"
	ReasonLeaderTransferred = "EtcdLeaderTransferred"
	ReasonRolloutFailed     = "EtcdRolloutFailed"
	ReasonRolloutDone       = "EtcdRolloutComplete"
	ReasonMemberReverted    = "EtcdMemberReverted"
)

// record posts an Event on the StatefulSet, so `kubectl describe sts` tells the rollout's story next to
// the controller's own. It is best effort: a rollout does not fail because an Event could not be written.
func (e *Engine) record(ctx context.Context, uid, eventType, reason, message string) {
	now := metav1.NewTime(time.Now())
	e.status.observeOutcome(now.Time, eventType, reason, message)
	ev := &corev1.Event{
		ObjectMeta: metav1.ObjectMeta{GenerateName: e.cfg.StatefulSet + ".", Namespace: e.cfg.Namespace},
		InvolvedObject: corev1.ObjectReference{APIVersion: "apps/v1", Kind: "StatefulSet", Namespace: e.cfg.Namespace,
			Name: e.cfg.StatefulSet, UID: types.UID(uid)},
		Reason: reason, Message: message, Type: eventType,
		Source:         corev1.EventSource{Component: "etcd-rollout"},
		FirstTimestamp: now, LastTimestamp: now, Count: 1,
		ReportingController: "etcd-rollout", ReportingInstance: e.cfg.Holder,
	}
	cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	_, _ = e.kube.CoreV1().Events(e.cfg.Namespace).Create(cctx, ev, metav1.CreateOptions{})
}
