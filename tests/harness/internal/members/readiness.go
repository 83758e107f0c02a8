package members

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/etcd-rollout/pulumi-etcd-rollout/tests/harness/memberapi"
)

// syncReadiness sets or removes the ready annotation, which the member kwok stages turn into the pod's
// Ready condition.
func (m *member) syncReadiness(ctx context.Context, pod *corev1.Pod) {
	want := m.wantReady()
	m.mu.Lock()
	m.ready = want
	m.mu.Unlock()
	have := pod.Annotations[memberapi.AnnotationReady] == "true"
	if want == have {
		return
	}
	value := "null"
	if want {
		value = `"true"`
	}
	patch := fmt.Sprintf(`{"metadata":{"annotations":{%q:%s}}}`, memberapi.AnnotationReady, value)
	_, err := m.d.kube.CoreV1().Pods(m.namespace).Patch(ctx, m.pod, types.MergePatchType, []byte(patch), metav1.PatchOptions{})
	if err != nil && !apierrors.IsNotFound(err) {
		slog.Error("setting readiness", "pod", m.key(), "ready", want, "err", err)
		return
	}
	slog.Info("readiness", "pod", m.key(), "ready", want)
}

func (m *member) wantReady() bool {
	m.mu.Lock()
	proc, l, sts := m.proc, m.launch, m.sts
	m.mu.Unlock()
	if proc == nil || proc.exited() {
		return false
	}
	if l.readiness != memberapi.ReadyOnProbe || m.d.bootstrapping(m.namespace, sts, l.replicas) {
		return true
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, fmt.Sprintf("http://127.0.0.1:%d/readyz", m.ports.Metrics), nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return false
	}
	resp.Body.Close()
	return resp.StatusCode == http.StatusOK
}
