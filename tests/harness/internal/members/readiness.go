package members

import (
	"context"
	"encoding/json"
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

// syncPodAnnotations sets or removes the ready annotation, which the member kwok stages turn into the pod's
// Ready condition, and sets the started annotation once the pod's container started, which they turn into
// phase Running (so a pod waiting out a start delay stays Pending).
func (m *member) syncPodAnnotations(ctx context.Context, pod *corev1.Pod) {
	want := m.wantReady()
	m.mu.Lock()
	m.ready = want
	started := m.startedUID == pod.UID
	m.mu.Unlock()
	changes := map[string]any{}
	if want != (pod.Annotations[memberapi.AnnotationReady] == "true") {
		changes[memberapi.AnnotationReady] = nil // merge patch: remove
		if want {
			changes[memberapi.AnnotationReady] = "true"
		}
	}
	if started && pod.Annotations[memberapi.AnnotationStarted] != "true" {
		changes[memberapi.AnnotationStarted] = "true"
	}
	if len(changes) == 0 {
		return
	}
	patch, _ := json.Marshal(map[string]any{"metadata": map[string]any{"annotations": changes}})
	_, err := m.d.kube.CoreV1().Pods(m.namespace).Patch(ctx, m.pod, types.MergePatchType, patch, metav1.PatchOptions{})
	if err != nil && !apierrors.IsNotFound(err) {
		slog.Error("setting pod annotations", "pod", m.key(), "ready", want, "started", started, "err", err)
		return
	}
	slog.Info("pod annotations", "pod", m.key(), "ready", want, "started", started)
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
	return answersOK(fmt.Sprintf("http://127.0.0.1:%d/readyz", m.ports.Metrics), time.Second)
}

// answersOK says an HTTP GET of url answers 200 within timeout (an etcd member's /readyz or /health).
func answersOK(url string, timeout time.Duration) bool {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return false
	}
	resp.Body.Close()
	return resp.StatusCode == http.StatusOK
}
