package statefulset

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func TestWithoutManagerDropsOnlyTheEngineEntry(t *testing.T) {
	sts := &appsv1.StatefulSet{ObjectMeta: metav1.ObjectMeta{ResourceVersion: "42", ManagedFields: []metav1.ManagedFieldsEntry{
		{Manager: "pulumi-kubernetes-1234", Operation: metav1.ManagedFieldsOperationApply},
		{Manager: "etcd-rollout", Operation: metav1.ManagedFieldsOperationUpdate},
		{Manager: "kube-controller-manager", Operation: metav1.ManagedFieldsOperationUpdate, Subresource: "status"},
	}}}
	patch, ok := WithoutManager(sts, "etcd-rollout")
	require.True(t, ok)
	var ops []struct {
		Op, Path string
		Value    json.RawMessage
	}
	require.NoError(t, json.Unmarshal(patch, &ops))
	require.Len(t, ops, 2)
	assert.Equal(t, []string{"test", "/metadata/resourceVersion", `"42"`}, []string{ops[0].Op, ops[0].Path, string(ops[0].Value)})
	assert.Equal(t, "replace", ops[1].Op)
	assert.NotContains(t, string(ops[1].Value), "etcd-rollout")
	assert.Contains(t, string(ops[1].Value), "pulumi-kubernetes-1234")
	assert.Contains(t, string(ops[1].Value), "kube-controller-manager")

	only := &appsv1.StatefulSet{ObjectMeta: metav1.ObjectMeta{ManagedFields: []metav1.ManagedFieldsEntry{{Manager: "etcd-rollout"}}}}
	patch, ok = WithoutManager(only, "etcd-rollout")
	require.True(t, ok)
	assert.Contains(t, string(patch), `"value":[{}]`, "an empty list would leave managedFields alone")

	_, ok = WithoutManager(&appsv1.StatefulSet{}, "etcd-rollout")
	assert.False(t, ok, "nothing to release")
}
