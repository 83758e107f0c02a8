package provider

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func stsManifest() map[string]any {
	return map[string]any{
		"apiVersion": "apps/v1", "kind": "StatefulSet",
		"metadata": map[string]any{"name": "etcd", "annotations": map[string]any{"team": "db"}},
		"spec": map[string]any{
			"replicas": 3.0, "serviceName": "etcd",
			"updateStrategy": map[string]any{"type": "OnDelete"},
			"template":       map[string]any{"spec": map[string]any{"containers": []any{map[string]any{"image": "etcd:v3.6.8"}}}},
		},
	}
}

func TestLockManifest(t *testing.T) {
	tests := []struct {
		name    string
		edit    func(m map[string]any)
		wantErr string
	}{
		{"locks a plain manifest", func(map[string]any) {}, ""},
		{"fills a missing name", func(m map[string]any) { delete(m["metadata"].(map[string]any), "name") }, ""},
		{"name mismatch", func(m map[string]any) { m["metadata"].(map[string]any)["name"] = "other" },
			`statefulSet.metadata.name is "other" but stsName is "etcd"`},
		{"namespace mismatch", func(m map[string]any) { m["metadata"].(map[string]any)["namespace"] = "prod" },
			`statefulSet.metadata.namespace is "prod" but namespace is "db"`},
		{"no replicas", func(m map[string]any) { delete(m["spec"].(map[string]any), "replicas") },
			"statefulSet.spec.replicas is not set"},
		{"replicas not a number", func(m map[string]any) { m["spec"].(map[string]any)["replicas"] = "3" },
			"it must be a number"},
		{"zero replicas", func(m map[string]any) { m["spec"].(map[string]any)["replicas"] = 0.0 }, "at least 1"},
		{"no template", func(m map[string]any) { delete(m["spec"].(map[string]any), "template") },
			"statefulSet.spec.template is missing"},
		{"wrong kind", func(m map[string]any) { m["kind"] = "Deployment" }, "it must be StatefulSet"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			in := stsManifest()
			tt.edit(in)
			got, err := lockManifest(in, "etcd", "db", "etcd")
			if tt.wantErr != "" {
				require.Error(t, err)
				assert.Contains(t, err.Error(), tt.wantErr)
				return
			}
			require.NoError(t, err)
			meta := got["metadata"].(map[string]any)
			assert.Equal(t, "etcd", meta["name"])
			assert.Equal(t, "db", meta["namespace"])
			assert.Equal(t, map[string]any{"team": "db", "pulumi.com/skipAwait": "true", "pulumi.com/patchForce": "true"}, meta["annotations"])
			assert.Equal(t, map[string]any{"type": "RollingUpdate", "rollingUpdate": map[string]any{"partition": 3}},
				got["spec"].(map[string]any)["updateStrategy"], "OnDelete is replaced by the partition lock")
			assert.NotContains(t, in["metadata"].(map[string]any)["annotations"], "pulumi.com/skipAwait", "the input is not modified")
		})
	}
}

func TestTemplateHash(t *testing.T) {
	base, err := templateHash(stsManifest())
	require.NoError(t, err)
	again, err := templateHash(stsManifest())
	require.NoError(t, err)
	assert.Equal(t, base, again, "stable for the same template")

	scaled := stsManifest()
	scaled["spec"].(map[string]any)["replicas"] = 5.0
	h, err := templateHash(scaled)
	require.NoError(t, err)
	assert.Equal(t, base, h, "only the pod template counts")

	newImage := stsManifest()
	newImage["spec"].(map[string]any)["template"].(map[string]any)["spec"].(map[string]any)["containers"] =
		[]any{map[string]any{"image": "etcd:v3.6.9"}}
	h, err = templateHash(newImage)
	require.NoError(t, err)
	assert.NotEqual(t, base, h, "a template change changes the hash")
}
