package provider

import (
	"reflect"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
)

// Every field of a StatefulSet's spec is classified: a field Kubernetes adds fails this test until someone says
// whether a change to it rolls, applies in place, or replaces the StatefulSet.
func TestEveryStatefulSetFieldIsClassified(t *testing.T) {
	typ := reflect.TypeFor[appsv1.StatefulSetSpec]()
	var names []string
	for i := range typ.NumField() {
		name, _, _ := strings.Cut(typ.Field(i).Tag.Get("json"), ",")
		names = append(names, name)
		assert.Contains(t, statefulSetFields, name, "StatefulSetSpec.%s is not classified", typ.Field(i).Name)
	}
	for name := range statefulSetFields {
		assert.Contains(t, names, name, "the table names %s, which StatefulSetSpec has not", name)
	}
	assert.Equal(t, []string{"podManagementPolicy", "selector", "serviceName", "volumeClaimTemplates"}, lockedFields())
}

// liveStatefulSet is a StatefulSet as the API server returns it: defaults filled in, claim templates with the
// kind, apiVersion and status it adds.
func liveStatefulSet() *appsv1.StatefulSet {
	mode := corev1.PersistentVolumeFilesystem
	return &appsv1.StatefulSet{Spec: appsv1.StatefulSetSpec{
		Replicas: ptr.To(int32(3)), ServiceName: "etcd-headless", PodManagementPolicy: appsv1.OrderedReadyPodManagement,
		Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "etcd"}},
		VolumeClaimTemplates: []corev1.PersistentVolumeClaim{{
			TypeMeta:   metav1.TypeMeta{Kind: "PersistentVolumeClaim", APIVersion: "v1"},
			ObjectMeta: metav1.ObjectMeta{Name: "data"},
			Spec: corev1.PersistentVolumeClaimSpec{
				AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce}, VolumeMode: &mode,
				Resources: corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")}},
			},
			Status: corev1.PersistentVolumeClaimStatus{Phase: corev1.ClaimPending},
		}},
	}}
}

// manifestSpec is the spec of a statefulSet input as a program writes it: no defaults.
func manifestSpec() map[string]any {
	return map[string]any{
		"replicas":    3,
		"serviceName": "etcd-headless",
		"selector":    map[string]any{"matchLabels": map[string]any{"app": "etcd"}},
		"template":    map[string]any{"metadata": map[string]any{"labels": map[string]any{"app": "etcd"}}},
		"volumeClaimTemplates": []any{map[string]any{
			"metadata": map[string]any{"name": "data"},
			"spec": map[string]any{"accessModes": []any{"ReadWriteOnce"},
				"resources": map[string]any{"requests": map[string]any{"storage": "1024Mi"}}},
		}},
	}
}

func TestLockedFieldChanges(t *testing.T) {
	tests := []struct {
		name   string
		change func(spec map[string]any)
		want   []string // the fields refused
	}{
		{name: "the same StatefulSet, defaults left out", change: func(map[string]any) {}},
		{name: "a template and a size of replicas apply without a replacement", change: func(s map[string]any) {
			s["replicas"], s["minReadySeconds"] = 5, 10
			s["template"] = map[string]any{"metadata": map[string]any{"labels": map[string]any{"app": "etcd", "v": "2"}}}
		}},
		{name: "the default podManagementPolicy said out loud", change: func(s map[string]any) { s["podManagementPolicy"] = "OrderedReady" }},
		{name: "a larger volume", change: func(s map[string]any) {
			s["volumeClaimTemplates"].([]any)[0].(map[string]any)["spec"].(map[string]any)["resources"] =
				map[string]any{"requests": map[string]any{"storage": "2Gi"}}
		}, want: []string{"spec.volumeClaimTemplates"}},
		{name: "Parallel, another service and selector", change: func(s map[string]any) {
			s["podManagementPolicy"], s["serviceName"] = "Parallel", "etcd"
			s["selector"] = map[string]any{"matchLabels": map[string]any{"app": "etcd2"}}
		}, want: []string{"spec.podManagementPolicy", "spec.selector", "spec.serviceName"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			spec := manifestSpec()
			tt.change(spec)
			changes, err := lockedFieldChanges(liveStatefulSet(), map[string]any{"spec": spec})
			require.NoError(t, err)
			var fields []string
			for _, c := range changes {
				fields = append(fields, c.Field)
			}
			assert.Equal(t, tt.want, fields)
		})
	}
}

// The refusal's first line says what happened and what to do; the values follow, one field a line.
func TestTheLockedFieldRefusalSaysWhatToDo(t *testing.T) {
	spec := manifestSpec()
	spec["volumeClaimTemplates"].([]any)[0].(map[string]any)["spec"].(map[string]any)["resources"] =
		map[string]any{"requests": map[string]any{"storage": "2Gi"}}
	changes, err := lockedFieldChanges(liveStatefulSet(), map[string]any{"spec": spec})
	require.NoError(t, err)
	lines := strings.Split(lockedFieldsError("db/etcd", changes).Error(), "\n")
	require.Len(t, lines, 2)
	assert.Equal(t, `StatefulSet db/etcd: spec.volumeClaimTemplates cannot change in place, and replacing the StatefulSet would delete every etcd member at once; nothing was changed: put the live value back in statefulSet, and see docs/usage.md "Fields a rollout cannot change" for how to change it safely`, lines[0])
	assert.Equal(t, "  spec.volumeClaimTemplates: live [data 1Gi], asked [data 2Gi]", lines[1])
}
