package provider

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

const testKubeconfig = `apiVersion: v1
kind: Config
clusters:
- name: a
  cluster: {server: "https://127.0.0.1:6443"}
- name: b
  cluster: {server: "https://127.0.0.1:7443"}
users:
- name: u
  user: {token: s3cr3t-token}
contexts:
- name: ctx-a
  context: {cluster: a, user: u}
- name: ctx-b
  context: {cluster: b, user: u}
current-context: ctx-a
`

func TestResolveRestConfig(t *testing.T) {
	path := filepath.Join(t.TempDir(), "config")
	require.NoError(t, os.WriteFile(path, []byte(testKubeconfig), 0o600))
	tests := []struct {
		name     string
		access   ClusterAccess
		wantHost string
		wantErr  string
	}{
		{"document, current context", ClusterAccess{Kubeconfig: testKubeconfig}, "https://127.0.0.1:6443", ""},
		{"document, chosen context", ClusterAccess{Kubeconfig: testKubeconfig, Context: "ctx-b"}, "https://127.0.0.1:7443", ""},
		{"path", ClusterAccess{Kubeconfig: path}, "https://127.0.0.1:6443", ""},
		{"cluster override", ClusterAccess{Kubeconfig: path, Cluster: "b"}, "https://127.0.0.1:7443", ""},
		{"unknown context", ClusterAccess{Kubeconfig: testKubeconfig, Context: "nope"}, "",
			`context "nope" is not in the kubeconfig (it has: ctx-a, ctx-b)`},
		{"missing file", ClusterAccess{Kubeconfig: "/does/not/exist"}, "", "kubeconfig file /does/not/exist does not exist"},
		{"garbage document", ClusterAccess{Kubeconfig: "apiVersion: v1\nclusters: [oops: s3cr3t-token"}, "", "content not shown"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg, err := ResolveRestConfig(tt.access)
			if tt.wantErr != "" {
				require.Error(t, err)
				assert.Contains(t, err.Error(), tt.wantErr)
				assert.NotContains(t, err.Error(), "s3cr3t-token", "credentials never reach an error")
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tt.wantHost, cfg.Host)
		})
	}
}
