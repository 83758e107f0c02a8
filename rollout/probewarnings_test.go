package rollout

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/etcd-rollout/pulumi-etcd-rollout/rollout/internal/probes"
)

// The observation judges the template's etcd container's probes, so preview and `plan` can warn; the plan
// itself is unchanged.
func TestTheObservationJudgesTheTemplatesProbes(t *testing.T) {
	c := newFakeCluster(t, 3, 1)
	obj, err := c.kube.Tracker().Get(stsGVR, "db", "etcd")
	require.NoError(t, err)
	sts := obj.(*appsv1.StatefulSet).DeepCopy()
	sts.Spec.Template.Spec.Containers = []corev1.Container{{Name: "etcd", Image: "registry.k8s.io/etcd:3.6.8-0",
		LivenessProbe: &corev1.Probe{ProbeHandler: corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Path: "/health", Port: intstr.FromInt32(2381)}},
			TimeoutSeconds: 15, PeriodSeconds: 10, FailureThreshold: 8}}}
	require.NoError(t, c.kube.Tracker().Update(stsGVR, sts, "db"))

	st, p, err := c.engine(t, nil).Plan(context.Background())
	require.NoError(t, err)
	require.Len(t, st.ProbeWarnings, 1)
	assert.Equal(t, probes.LivenessNeedsQuorum, st.ProbeWarnings[0].Kind)
	assert.Equal(t, []int{2, 1, 0}, p.Roll, "the roll goes on")
}
