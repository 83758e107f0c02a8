package rollout

import (
	"context"
	"crypto/x509"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/etcd-rollout/pulumi-etcd-rollout/rollout/internal/member"
	"github.com/etcd-rollout/pulumi-etcd-rollout/rollout/internal/podfile"
	"github.com/etcd-rollout/pulumi-etcd-rollout/rollout/internal/progress"
	"github.com/etcd-rollout/pulumi-etcd-rollout/rollout/internal/trust"
)

// The status ConfigMap a rollout publishes (internal/progress): its name, its condition types and reasons,
// its data keys, and the Kubernetes Event reasons of the rollout's story.

// StatusConfigMapName is the ConfigMap where a rollout of sts publishes its status.
func StatusConfigMapName(sts string) string { return progress.StatusConfigMapName(sts) }

// RolloutStatus is the status a rollout published, as read back from its ConfigMap.
type RolloutStatus = progress.RolloutStatus

// ParseStatus reads the data of a status ConfigMap (StatusConfigMapName).
func ParseStatus(data map[string]string) RolloutStatus { return progress.ParseStatus(data) }

const (
	ConditionProgressing     = progress.ConditionProgressing
	ConditionMembersUpdated  = progress.ConditionMembersUpdated
	ConditionFailed          = progress.ConditionFailed
	StatusReasonProgressing  = progress.StatusReasonProgressing
	StatusReasonComplete     = progress.StatusReasonComplete
	StatusReasonFailed       = progress.StatusReasonFailed
	StatusReasonRolling      = progress.StatusReasonRolling
	StatusReasonAllUpdated   = progress.StatusReasonAllUpdated
	StatusKeyConditions      = progress.StatusKeyConditions
	StatusKeyTargetRevision  = progress.StatusKeyTargetRevision
	StatusKeyMembersDone     = progress.StatusKeyMembersDone
	StatusKeyMembers         = progress.StatusKeyMembers
	StatusKeyPending         = progress.StatusKeyPending
	StatusKeyStep            = progress.StatusKeyStep
	StatusKeyMessage         = progress.StatusKeyMessage
	StatusKeyRun             = progress.StatusKeyRun
	StatusKeyUpdatedAt       = progress.StatusKeyUpdatedAt
	StatusKeyTemplateVersion = progress.StatusKeyTemplateVersion
	StatusKeySnapshot        = progress.StatusKeySnapshot
	StatusKeyWriteOutage     = progress.StatusKeyWriteOutage
	ReasonMemberRolled       = progress.ReasonMemberRolled
	ReasonLeaderTransferred  = progress.ReasonLeaderTransferred
	ReasonRolloutFailed      = progress.ReasonRolloutFailed
	ReasonRolloutDone        = progress.ReasonRolloutDone
	ReasonMemberReverted     = progress.ReasonMemberReverted
)

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

// record posts an Event on the StatefulSet, so `kubectl describe sts` tells the rollout's story next to
// the controller's own. It is best effort: a rollout does not fail because an Event could not be written.
func (e *Engine) record(ctx context.Context, uid, eventType, reason, message string) {
	now := metav1.NewTime(time.Now())
	e.status.ObserveOutcome(now.Time, eventType, reason, message)
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
