package health

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	k8stypes "k8s.io/apimachinery/pkg/types"
)

func TestPodWitness(t *testing.T) {
	t0 := metav1.NewTime(time.Date(2026, 12, 2, 10, 0, 0, 0, time.UTC))
	pod := func(uid string, ready bool, since metav1.Time, restarts int32) *corev1.Pod {
		status := corev1.ConditionFalse
		if ready {
			status = corev1.ConditionTrue
		}
		p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{UID: k8stypes.UID("uid-" + uid)}}
		p.Status.Phase = corev1.PodRunning
		p.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: status, LastTransitionTime: since}}
		p.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: "etcd", RestartCount: restarts}}
		return p
	}
	later := metav1.NewTime(t0.Add(5 * time.Second))
	for _, tt := range []struct {
		name     string
		readings []*corev1.Pod
		stayedUp bool
		fell     string
	}{
		{name: "nothing seen vouches for nothing"},
		{name: "the same Ready pod throughout", readings: []*corev1.Pod{pod("a", true, t0, 1), pod("a", true, t0, 1)}, stayedUp: true},
		{name: "container restarted", readings: []*corev1.Pod{pod("a", true, t0, 1), pod("a", true, t0, 2)}, fell: "its container restarted (2 restarts, 1 before)"},
		{name: "a flap between two readings", readings: []*corev1.Pod{pod("a", true, t0, 0), pod("a", true, later, 0)}, fell: "its pod went not Ready and back (Ready since 2026-12-02T10:00:05Z)"},
		{name: "not Ready", readings: []*corev1.Pod{pod("a", true, t0, 0), pod("a", false, later, 0)}, fell: "its pod went not Ready (phase Running)"},
		{name: "not Ready at the first reading", readings: []*corev1.Pod{pod("a", false, t0, 0)}, fell: "its pod went not Ready (phase Running)"},
		{name: "replaced", readings: []*corev1.Pod{pod("a", true, t0, 0), pod("b", true, t0, 0)}, fell: "its pod was replaced"},
		{name: "deleted", readings: []*corev1.Pod{pod("a", true, t0, 0), nil}, fell: "its pod was deleted"},
		{name: "the first fall is kept", readings: []*corev1.Pod{pod("a", true, t0, 0), pod("a", true, t0, 1), nil}, fell: "its container restarted (1 restarts, 0 before)"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			w := &PodWitness{}
			for _, p := range tt.readings {
				w.Observe(p)
			}
			assert.Equal(t, tt.stayedUp, w.StayedUp())
			assert.Equal(t, tt.fell, w.Fell)
		})
	}
}
