package harness_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"

	"github.com/etcd-rollout/pulumi-etcd-rollout/tests/harness"
	"github.com/etcd-rollout/pulumi-etcd-rollout/tests/harness/memberapi"
)

// A spec's start faults reach the pod template as the annotations the member daemon reads, in seconds that
// read back to the same durations; unset faults leave no annotation.
func TestStartFaultsRenderAsAnnotations(t *testing.T) {
	tests := []struct {
		name   string
		faults harness.StartFaults
		want   map[string]string
	}{
		{"none", harness.StartFaults{}, map[string]string{}},
		{"start delay", harness.StartFaults{StartDelay: 20 * time.Second}, map[string]string{memberapi.AnnotationStartDelay: "20"}},
		{"all", harness.StartFaults{StartDelay: 3 * time.Second, ServeDelay: 1500 * time.Millisecond, CrashAfter: 4 * time.Second},
			map[string]string{memberapi.AnnotationStartDelay: "3", memberapi.AnnotationServeDelay: "1.5", memberapi.AnnotationCrashAfter: "4"}},
		{"clients refused", harness.StartFaults{ClientsRefused: true}, map[string]string{memberapi.AnnotationClientsRefused: "true"}},
		{"on some ordinals", harness.StartFaults{ClientsRefused: true, CrashAfter: time.Second, Ordinals: []int{2, 0}},
			map[string]string{memberapi.AnnotationClientsRefused: "true", memberapi.AnnotationCrashAfter: "1", memberapi.AnnotationFaultOrdinals: "0,2"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			assert.Equal(t, tt.want, tt.faults.Annotations())
			spec := harness.EtcdSpec{}
			spec.StartFaults = tt.faults
			_, sts, err := harness.Render(spec)
			require.NoError(t, err)
			got := map[string]string{}
			for _, key := range []string{memberapi.AnnotationStartDelay, memberapi.AnnotationServeDelay, memberapi.AnnotationCrashAfter} {
				if v, ok := sts.Spec.Template.Annotations[key]; ok {
					got[key] = v
					d, err := memberapi.ParseSeconds(v)
					require.NoError(t, err)
					assert.Positive(t, d)
				}
			}
			if v, ok := sts.Spec.Template.Annotations[memberapi.AnnotationClientsRefused]; ok {
				got[memberapi.AnnotationClientsRefused] = v
			}
			if v, ok := sts.Spec.Template.Annotations[memberapi.AnnotationFaultOrdinals]; ok {
				got[memberapi.AnnotationFaultOrdinals] = v
				ords, err := memberapi.ParseOrdinals(v)
				require.NoError(t, err)
				assert.ElementsMatch(t, tt.faults.Ordinals, ords)
			}
			assert.Equal(t, tt.want, got)
		})
	}
}

// Apply makes a template carry exactly the faults given: a later change without them heals the revision.
func TestStartFaultsApplyReplaces(t *testing.T) {
	tmpl := &corev1.PodTemplateSpec{}
	harness.StartFaults{StartDelay: time.Second, CrashAfter: 2 * time.Second}.Apply(tmpl)
	assert.Equal(t, map[string]string{memberapi.AnnotationStartDelay: "1", memberapi.AnnotationCrashAfter: "2"}, tmpl.Annotations)
	harness.StartFaults{ServeDelay: 3 * time.Second}.Apply(tmpl)
	assert.Equal(t, map[string]string{memberapi.AnnotationServeDelay: "3"}, tmpl.Annotations)
	harness.StartFaults{ClientsRefused: true, Ordinals: []int{0}}.Apply(tmpl)
	assert.Equal(t, map[string]string{memberapi.AnnotationClientsRefused: "true", memberapi.AnnotationFaultOrdinals: "0"}, tmpl.Annotations)
	harness.StartFaults{}.Apply(tmpl)
	assert.Empty(t, tmpl.Annotations)
}

func TestStartFaultsValidated(t *testing.T) {
	for _, f := range []harness.StartFaults{{StartDelay: -time.Second}, {CrashAfter: time.Microsecond},
		{ClientsRefused: true, Ordinals: []int{-1}}, {ClientsRefused: true, Ordinals: []int{0, 3}}} { // 3 replicas: 0 to 2
		spec := harness.EtcdSpec{StartFaults: f}
		_, err := spec.WithDefaults()
		assert.Error(t, err, "%+v", f)
	}
}
