package probes

import (
	"testing"

	"github.com/stretchr/testify/assert"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
)

func httpProbe(path string, timeout, period, failures int32) *corev1.Probe {
	return &corev1.Probe{ProbeHandler: corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Path: path, Port: intstr.FromInt32(2381)}},
		TimeoutSeconds: timeout, PeriodSeconds: period, FailureThreshold: failures}
}

func execProbe(timeout, period, failures int32, cmd ...string) *corev1.Probe {
	return &corev1.Probe{ProbeHandler: corev1.ProbeHandler{Exec: &corev1.ExecAction{Command: cmd}},
		TimeoutSeconds: timeout, PeriodSeconds: period, FailureThreshold: failures}
}

func TestJudgeNamesTheProbesThatTurnAHiccupIntoAnOutage(t *testing.T) {
	for _, tc := range []struct {
		name      string
		liveness  *corev1.Probe
		readiness *corev1.Probe
		want      []Kind
	}{
		{name: "kubeadm's: serializable /health, 15 s, 8 × 10 s", liveness: httpProbe("/health?exclude=NOSPACE&serializable=true", 15, 10, 8)},
		{name: "/livez, 5 s, 3 × 10 s", liveness: httpProbe("/livez", 5, 10, 3)},
		{name: "a TCP check", liveness: &corev1.Probe{ProbeHandler: corev1.ProbeHandler{TCPSocket: &corev1.TCPSocketAction{Port: intstr.FromInt32(2379)}}}},
		{name: "no probes"},
		{name: "/health, long enough", liveness: httpProbe("/health", 15, 10, 8), want: []Kind{LivenessNeedsQuorum}},
		{name: "/health with the defaults (1 s, 3 × 10 s)", liveness: httpProbe("/health", 0, 0, 0), want: []Kind{LivenessNeedsQuorum, LivenessShortWindow}},
		{name: "/livez with a short window", liveness: httpProbe("/livez", 5, 5, 3), want: []Kind{LivenessShortWindow}},
		{name: "bitnami's etcdctl endpoint health", liveness: execProbe(5, 10, 5, "/opt/bitnami/scripts/etcd/healthcheck.sh", "etcdctl endpoint health"), want: []Kind{LivenessNeedsQuorum}},
		{name: "curl of serializable /health", liveness: execProbe(5, 10, 6, "sh", "-c", "curl -f http://localhost:2381/health?serializable=true")},
		{name: "readiness on /health", readiness: httpProbe("/health", 5, 10, 3), want: []Kind{ReadinessOnHealth}},
		{name: "readiness on /readyz", readiness: httpProbe("/readyz", 5, 10, 3)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var got []Kind
			for _, f := range Judge(&corev1.Container{Name: "etcd", LivenessProbe: tc.liveness, ReadinessProbe: tc.readiness}) {
				got = append(got, f.Kind)
				assert.NotEmpty(t, f.Instead)
				assert.Contains(t, f.String(), "instead")
			}
			assert.Equal(t, tc.want, got)
		})
	}
}

func TestAFindingSaysWhatToUseInOneLine(t *testing.T) {
	f := Judge(&corev1.Container{LivenessProbe: httpProbe("/health", 0, 0, 0)})
	assert.Equal(t, "livenessProbe httpGet /health: it fails on every member while the cluster has no quorum, and the kubelet then restarts them all, turning one member's restart plus one more fault into an outage (etcd#13340, kubeadm#2567); use httpGet /livez (etcd 3.5.11 and later) or /health?serializable=true, a tcpSocket check on the client port, or no liveness probe instead", f[0].String())
	assert.Contains(t, f[1].String(), "it gives up after 3 × 10 s with a 1 s timeout")
}
