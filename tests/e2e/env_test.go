//go:build e2e

package e2e

import (
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"testing"

	"github.com/stretchr/testify/require"
)

// paths are the repository's binaries and tools the tests run.
type paths struct {
	root      string // repository root
	tools     string // .tools (TOOLS_DIR)
	pulumi    string // the pulumi CLI
	pluginDir string // holds pulumi-resource-etcd-rollout
	k8sPlugin string // holds pulumi-resource-kubernetes
}

func repoPaths(t *testing.T) paths {
	t.Helper()
	p := locatePaths(t)
	_, err := os.Stat(filepath.Join(p.pluginDir, "pulumi-resource-etcd-rollout"))
	require.NoError(t, err, "%s is missing: run make test-e2e (it builds the provider and the tools first)", p.pluginDir)
	return p
}

// locatePaths finds the repository and its tools; it requires the tools (the pulumi CLI and the kubernetes
// plugin), not this repository's build of the provider.
func locatePaths(t *testing.T) paths {
	t.Helper()
	_, file, _, _ := runtime.Caller(0)
	root, err := filepath.Abs(filepath.Join(filepath.Dir(file), "..", ".."))
	require.NoError(t, err)
	tools := os.Getenv("TOOLS_DIR")
	if tools == "" {
		tools = filepath.Join(root, ".tools")
	}
	p := paths{root: root, tools: tools, pulumi: filepath.Join(tools, "bin", "pulumi"),
		pluginDir: filepath.Join(root, "bin"), k8sPlugin: filepath.Join(tools, "bin")}
	for _, f := range []string{p.pulumi, filepath.Join(p.k8sPlugin, "pulumi-resource-kubernetes")} {
		_, err := os.Stat(f)
		require.NoError(t, err, "%s is missing: run make tools-pulumi", f)
	}
	return p
}

// pulumiEnv isolates every pulumi command: its own home, state and snapshot directory in t's temp dir, the
// project's CLI first on PATH, a passphrase for the file backend's secrets, and no network for plugins or
// update checks.
func pulumiEnv(t *testing.T, p paths) (env map[string]string, backend string) {
	t.Helper()
	dir := t.TempDir()
	backend = "file://" + filepath.Join(dir, "state")
	require.NoError(t, os.MkdirAll(filepath.Join(dir, "state"), 0o755))
	env = map[string]string{
		"PULUMI_HOME":                                 filepath.Join(dir, "home"),
		"PULUMI_CONFIG_PASSPHRASE":                    "e2e",
		"PULUMI_SKIP_UPDATE_CHECK":                    "true",
		"PULUMI_DISABLE_AUTOMATIC_PLUGIN_ACQUISITION": "true",
		"PULUMI_BACKEND_URL":                          backend,
		// A minor-version change stores its snapshot under it by default: the test's, never the user's.
		"XDG_STATE_HOME": filepath.Join(dir, "state-home"),
		"PATH":           filepath.Dir(p.pulumi) + string(os.PathListSeparator) + os.Getenv("PATH"),
	}
	return env, backend
}

// pluginSettings is the project settings' plugins.providers: both providers come from local folders.
func pluginSettings(p paths) []map[string]string {
	return []map[string]string{
		{"name": "etcd-rollout", "path": p.pluginDir},
		{"name": "kubernetes", "path": p.k8sPlugin},
	}
}

func lookPath(t *testing.T, name string) string {
	t.Helper()
	path, err := exec.LookPath(name)
	require.NoError(t, err, "%s is not on PATH", name)
	return path
}

// copyExample copies an example's program files (not its node_modules or build output) to dst.
func copyExample(t *testing.T, src, dst string) string {
	t.Helper()
	require.NoError(t, os.RemoveAll(dst))
	require.NoError(t, os.MkdirAll(dst, 0o755))
	entries, err := os.ReadDir(src)
	require.NoError(t, err)
	for _, e := range entries {
		if e.IsDir() {
			continue
		}
		b, err := os.ReadFile(filepath.Join(src, e.Name()))
		require.NoError(t, err)
		require.NoError(t, os.WriteFile(filepath.Join(dst, e.Name()), b, 0o644))
	}
	t.Cleanup(func() { _ = os.RemoveAll(dst) })
	return dst
}
