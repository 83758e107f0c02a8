package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// runMainEnv makes the test binary run main() instead of the tests, so a test can run the real command under
// any file name without building it again.
const runMainEnv = "ETCD_ROLLOUT_TEST_RUN_MAIN"

func TestMain(m *testing.M) {
	if os.Getenv(runMainEnv) == "1" {
		main()
		return
	}
	os.Exit(m.Run())
}

// TestKubectlPlugin runs the command as kubectl does for `kubectl etcd-rollout`: found on PATH as
// kubectl-etcd_rollout. Its usage must then name it "kubectl etcd-rollout"; under its own name, "etcd-rollout".
func TestKubectlPlugin(t *testing.T) {
	self, err := os.Executable()
	require.NoError(t, err)
	dir := t.TempDir()
	for _, name := range []string{pluginBinary, "etcd-rollout"} {
		require.NoError(t, os.Symlink(self, filepath.Join(dir, name)))
	}
	t.Setenv("PATH", dir+string(os.PathListSeparator)+os.Getenv("PATH"))
	tests := []struct {
		binary  string
		args    []string
		want    []string
		notWant string
	}{
		{pluginBinary, []string{"--help"},
			[]string{"kubectl etcd-rollout [command]", "kubectl etcd-rollout [command] --help", "status", "plan", "run", "unlock"}, ""},
		{pluginBinary, []string{"status", "--help"}, []string{"kubectl etcd-rollout status [flags]"}, ""},
		{pluginBinary, []string{"unlock", "--help"}, []string{"kubectl etcd-rollout unlock"}, ""},
		{"etcd-rollout", []string{"--help"}, []string{"etcd-rollout [command]"}, "kubectl etcd-rollout"},
	}
	for _, tt := range tests {
		t.Run(tt.binary+" "+tt.args[0], func(t *testing.T) {
			// Found through PATH, the way kubectl finds a plugin.
			path, err := exec.LookPath(tt.binary)
			require.NoError(t, err)
			require.Equal(t, dir, filepath.Dir(path))
			cmd := exec.Command(path, tt.args...)
			cmd.Env = append(os.Environ(), runMainEnv+"=1")
			out, err := cmd.CombinedOutput()
			require.NoError(t, err, "%s", out)
			for _, w := range tt.want {
				assert.Contains(t, string(out), w)
			}
			if tt.notWant != "" {
				assert.NotContains(t, string(out), tt.notWant)
			}
		})
	}
}

// TestKubectlRunsThePlugin has kubectl itself find and run the plugin, when the project's tools are built
// (tools/build.sh builds kubectl with the cluster set).
func TestKubectlRunsThePlugin(t *testing.T) {
	kubectl := filepath.Join("..", "..", ".tools", "bin", "kubectl")
	if dir := os.Getenv("TOOLS_DIR"); dir != "" {
		kubectl = filepath.Join(dir, "bin", "kubectl")
	}
	if _, err := os.Stat(kubectl); err != nil {
		t.Skipf("kubectl is not built (%v): make tools builds it", err)
	}
	self, err := os.Executable()
	require.NoError(t, err)
	dir := t.TempDir()
	require.NoError(t, os.Symlink(self, filepath.Join(dir, pluginBinary)))
	t.Setenv("PATH", dir+string(os.PathListSeparator)+os.Getenv("PATH"))
	t.Setenv(runMainEnv, "1")

	list, err := exec.Command(kubectl, "plugin", "list").CombinedOutput()
	require.NoError(t, err, "%s", list)
	assert.Contains(t, string(list), filepath.Join(dir, pluginBinary))
	for _, sub := range []string{"status", "plan", "run", "unlock"} {
		out, err := exec.Command(kubectl, "etcd-rollout", sub, "--help").CombinedOutput()
		require.NoError(t, err, "%s", out)
		assert.Contains(t, string(out), "kubectl etcd-rollout "+sub)
	}
}
