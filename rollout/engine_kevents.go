package rollout

import (
	"context"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

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
