//go:build e2e && install

package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/etcd-rollout/pulumi-etcd-rollout/tests/harness"
)

// TestInstallFromReleaseFiles is a platform team's first day, from outside this repository: in an empty
// directory, with nothing of the repository on PATH or in a module path but the release files of dist/ (make
// dist-host), the plugin is installed with `pulumi plugin install --file`, the npm tarball and the wheel into
// projects of their own, and a TypeScript program, a Python program and a Pulumi YAML project (the plain CLI)
// each create an etcd cluster and roll a template change on the local cluster. Every provider process the
// CLI starts must be the installed plugin, and every SDK the programs load the installed package.
func TestInstallFromReleaseFiles(t *testing.T) {
	p := locatePaths(t) // the tools only: this repository's bin/ is not used
	c := harness.Connect(t)
	sb := newSandbox(t, p, releaseFiles(t, p))
	seen := watchProviderProcesses(t)

	t.Run("typescript", func(t *testing.T) { sb.rollTypeScript(t, c) })
	t.Run("python", func(t *testing.T) { sb.rollPython(t, c) })
	t.Run("yaml", func(t *testing.T) { sb.rollYAML(t, c) })

	exes := seen()
	require.NotEmpty(t, exes, "no pulumi-resource-etcd-rollout process was seen")
	for _, exe := range exes {
		assert.True(t, strings.HasPrefix(exe, sb.dir+string(filepath.Separator)),
			"the CLI ran the provider %s, not the plugin installed from the release tarball", exe)
	}
}

// release is the files of one version in dist/.
type release struct {
	version       string
	plugin, npm   string
	wheel         string
	k8sPluginPath string // the pulumi-resource-kubernetes a user would install from its own release
}

func releaseFiles(t *testing.T, p paths) release {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join(p.root, "VERSION"))
	require.NoError(t, err)
	v := strings.TrimSpace(string(raw))
	dist := filepath.Join(p.root, "dist")
	r := release{
		version:       v,
		plugin:        filepath.Join(dist, fmt.Sprintf("pulumi-resource-etcd-rollout-v%s-%s-%s.tar.gz", v, runtime.GOOS, runtime.GOARCH)),
		npm:           filepath.Join(dist, fmt.Sprintf("pulumi-etcd-rollout-%s.tgz", v)),
		wheel:         filepath.Join(dist, fmt.Sprintf("pulumi_etcd_rollout-%s-py3-none-any.whl", v)),
		k8sPluginPath: filepath.Join(p.k8sPlugin, "pulumi-resource-kubernetes"),
	}
	for _, f := range []string{r.plugin, r.npm, r.wheel} {
		_, err := os.Stat(f)
		require.NoError(t, err, "%s is missing: run make dist-host (make test-install does it first)", f)
	}
	return r
}

// sandbox is the user's machine: a directory outside the repository with its own PATH, pulumi home and
// state, and a project per language.
type sandbox struct {
	dir     string
	p       paths
	rel     release
	env     map[string]string
	backend string
}

// newSandbox makes the directory, puts the pulumi CLI and the YAML language host (tools a user installs on
// their own) in its bin/, and installs both provider plugins from tarballs, the way an air-gapped runner does.
func newSandbox(t *testing.T, p paths, rel release) *sandbox {
	t.Helper()
	dir, err := filepath.EvalSymlinks(t.TempDir())
	require.NoError(t, err)
	require.False(t, strings.HasPrefix(dir, p.root), "the sandbox %s must be outside the repository", dir)
	bin := filepath.Join(dir, "bin")
	require.NoError(t, os.MkdirAll(bin, 0o755))
	for _, tool := range []string{"pulumi", "pulumi-language-yaml"} {
		copyFile(t, filepath.Join(p.tools, "bin", tool), filepath.Join(bin, tool), 0o755)
	}
	// PATH: the sandbox's bin, then where node, npm and python3 live, then the system's: never the
	// repository's bin/ or .tools/bin.
	pathDirs := []string{bin}
	for _, tool := range []string{"node", "npm", "python3"} {
		pathDirs = append(pathDirs, filepath.Dir(lookPath(t, tool)))
	}
	pathDirs = append(pathDirs, "/usr/bin", "/bin")
	for _, d := range pathDirs {
		require.False(t, strings.HasPrefix(d, p.root), "%s on the sandbox's PATH is in the repository", d)
	}
	sb := &sandbox{dir: dir, p: p, rel: rel, backend: "file://" + filepath.Join(dir, "state")}
	require.NoError(t, os.MkdirAll(filepath.Join(dir, "state"), 0o755))
	sb.env = map[string]string{
		"PATH":                     strings.Join(pathDirs, string(os.PathListSeparator)),
		"PULUMI_HOME":              filepath.Join(dir, "pulumi-home"),
		"PULUMI_BACKEND_URL":       sb.backend,
		"PULUMI_CONFIG_PASSPHRASE": "install",
		"PULUMI_SKIP_UPDATE_CHECK": "true",
		// Nothing is downloaded: the plugins come from the tarballs below or not at all.
		"PULUMI_DISABLE_AUTOMATIC_PLUGIN_ACQUISITION": "true",
	}
	sb.run(t, dir, "pulumi", "plugin", "install", "resource", "etcd-rollout", "v"+rel.version, "--file", rel.plugin)
	k8sTarball := filepath.Join(dir, "pulumi-resource-kubernetes.tar.gz")
	sb.run(t, filepath.Dir(rel.k8sPluginPath), "tar", "-czf", k8sTarball, "pulumi-resource-kubernetes")
	sb.run(t, dir, "pulumi", "plugin", "install", "resource", "kubernetes", "v4.25.0", "--file", k8sTarball)
	ls := sb.run(t, dir, "pulumi", "plugin", "ls")
	require.Contains(t, ls, "etcd-rollout")
	t.Logf("pulumi plugin ls in the sandbox:\n%s", ls)
	return sb
}

// run runs a command of the user's in dir with the sandbox's environment and returns its output.
func (sb *sandbox) run(t *testing.T, dir, name string, args ...string) string {
	t.Helper()
	out, err := sb.command(dir, name, args...).CombinedOutput()
	require.NoError(t, err, "%s %s:\n%s", name, strings.Join(args, " "), out)
	return string(out)
}

func (sb *sandbox) command(dir, name string, args ...string) *exec.Cmd {
	cmd := exec.Command(name, args...)
	if !strings.Contains(name, "/") {
		for _, d := range filepath.SplitList(sb.env["PATH"]) {
			if _, err := os.Stat(filepath.Join(d, name)); err == nil {
				cmd.Path = filepath.Join(d, name)
				break
			}
		}
	}
	cmd.Dir = dir
	cmd.Env = os.Environ()
	for k, v := range sb.env {
		cmd.Env = append(cmd.Env, k+"="+v)
	}
	return cmd
}

// driver is a procRunner for a driver script in the sandbox, with no plugins section: the CLI takes the
// plugins installed in the sandbox's pulumi home.
func (sb *sandbox) driver(t *testing.T, argv ...string) *procRunner {
	env := map[string]string{"E2E_BACKEND": sb.backend, "E2E_WORK_DIR": t.TempDir()}
	for k, v := range sb.env {
		env[k] = v
	}
	return &procRunner{t: t, argv: argv, env: env, workDir: env["E2E_WORK_DIR"]}
}

// rollTypeScript installs the npm tarball into a project with the pinned @pulumi packages, type-checks the
// drop-in example against the installed declarations, and creates and rolls a cluster with it.
func (sb *sandbox) rollTypeScript(t *testing.T, c *harness.Cluster) {
	project := filepath.Join(sb.dir, "ts")
	require.NoError(t, os.MkdirAll(project, 0o755))
	for _, f := range []string{"package.json", "package-lock.json", "driver.js"} {
		copyFile(t, filepath.Join(sb.p.root, "tests", "e2e", "node", f), filepath.Join(project, f), 0o644)
	}
	npm := []string{"--ignore-scripts", "--no-audit", "--no-fund", "--prefer-offline"}
	sb.run(t, project, "npm", append([]string{"ci"}, npm...)...)
	sb.run(t, project, "npm", append([]string{"install", "--no-save", sb.rel.npm}, npm...)...)
	resolved := strings.TrimSpace(sb.run(t, project, "node", "-p", `require("fs").realpathSync(require.resolve("pulumi-etcd-rollout"))`))
	require.True(t, strings.HasPrefix(resolved, project), "the program loads pulumi-etcd-rollout from %s", resolved)

	program := copyExample(t, filepath.Join(sb.p.root, "examples", "ts-dropin"), filepath.Join(project, "ts-dropin"))
	copyExample(t, filepath.Join(sb.p.root, "examples", "shared"), filepath.Join(project, "shared"))
	sb.run(t, project, filepath.Join(project, "node_modules", ".bin", "tsc"), "--noEmit", "-p", program)

	r := sb.driver(t, lookPath(t, "node"), filepath.Join(project, "driver.js"), program, "install-ts")
	ns := c.Namespace(t)
	rollTwice(t, c, ns, r, func(rev string) map[string]string {
		return map[string]string{"kubeconfig": c.Kubeconfig, "namespace": ns, "createNamespace": "false",
			"nodeName": c.NodeName, "podRevision": rev}
	})
}

// rollPython installs the wheel into a virtualenv with the pinned pulumi packages and creates and rolls a
// cluster with examples/python (the component owns the StatefulSet, reached through a kubeconfig input).
func (sb *sandbox) rollPython(t *testing.T, c *harness.Cluster) {
	venv := filepath.Join(sb.dir, "venv")
	sb.run(t, sb.dir, "python3", "-m", "venv", venv)
	pip := filepath.Join(venv, "bin", "pip")
	sb.run(t, sb.dir, pip, "install", "--quiet", "--no-deps", "-r", filepath.Join(sb.p.root, "tests", "e2e", "python", "requirements.txt"))
	sb.run(t, sb.dir, pip, "install", "--quiet", "--no-deps", sb.rel.wheel)
	python := filepath.Join(venv, "bin", "python")
	resolved := strings.TrimSpace(sb.run(t, sb.dir, python, "-c", "import os, pulumi_etcd_rollout as m; print(os.path.realpath(m.__file__))"))
	require.True(t, strings.HasPrefix(resolved, venv), "the program loads pulumi_etcd_rollout from %s", resolved)

	program := copyExample(t, filepath.Join(sb.p.root, "examples", "python"), filepath.Join(sb.dir, "python"))
	driver := filepath.Join(sb.dir, "driver.py")
	copyFile(t, filepath.Join(sb.p.root, "tests", "e2e", "python", "driver.py"), driver, 0o644)
	r := sb.driver(t, python, driver, program, "install-python")
	ns := c.Namespace(t)
	rollTwice(t, c, ns, r, func(rev string) map[string]string {
		return map[string]string{"kubeconfig": c.Kubeconfig, "namespace": ns, "createNamespace": "false",
			"nodeName": c.NodeName, "podRevision": rev}
	})
}

// rollTwice creates the cluster, then rolls a template change, and checks the roll against etcd itself: every
// pod on the new revision, the partition locked, and the raft term raised by the leader transfers only.
func rollTwice(t *testing.T, c *harness.Cluster, ns string, r runner, config func(rev string) map[string]string) {
	t.Helper()
	ctx := t.Context()
	res, err := r.up(ctx, config("1"))
	require.NoError(t, err, "first up:\n%s", res.explained())
	requireRolledAndLocked(t, viewStatefulSet(ctx, t, c, ns))
	e := attachExample(t, c, ns)
	term := e.Must(t).Term()

	res, err = r.up(ctx, config("2"))
	require.NoError(t, err, "rolling up:\n%s", res.explained())
	requireRolledAndLocked(t, viewStatefulSet(ctx, t, c, ns))
	requireRolledWithoutElection(t, e, term, res.Outputs)
	require.NoError(t, r.destroy(ctx))
}

func attachExample(t *testing.T, c *harness.Cluster, ns string) *harness.Etcd {
	t.Helper()
	e, err := c.AttachEtcd(ns, harness.EtcdSpec{Name: "etcd", ServiceName: "etcd-headless", Replicas: 3})
	require.NoError(t, err)
	require.NoError(t, e.WaitHealthy(t.Context()), "every member healthy")
	return e
}

// requireRolledWithoutElection checks a rollout's outputs against etcd: the three members rolled, and the raft
// term raised by the reported transfers alone (an unplanned election would raise it more).
func requireRolledWithoutElection(t *testing.T, e *harness.Etcd, termBefore uint64, outputs map[string]any) {
	t.Helper()
	assert.Equal(t, []any{"etcd-2", "etcd-1", "etcd-0"}, outputs["membersRolled"])
	assert.EqualValues(t, 0, outputs["unplannedElections"])
	transfers, ok := outputs["leaderTransfers"].(float64)
	require.True(t, ok, "leaderTransfers output %v", outputs["leaderTransfers"])
	require.NoError(t, e.WaitHealthy(t.Context()), "every member healthy after the rollout")
	assert.Equal(t, termBefore+uint64(transfers), e.Must(t).Term(), "the raft term rose by the %v transfers only", transfers)
	t.Logf("rolled %v with %v leader transfers", outputs["membersRolled"], transfers)
}

// rollYAML runs examples/yaml with the plain pulumi CLI in a project directory of its own, as its README says:
// preview --diff, up, a template change previewed, up.
func (sb *sandbox) rollYAML(t *testing.T, c *harness.Cluster) {
	project := copyExample(t, filepath.Join(sb.p.root, "examples", "yaml"), filepath.Join(sb.dir, "yaml"))
	ns := c.Namespace(t)
	ctx := t.Context()
	sb.run(t, project, "pulumi", "stack", "init", "install")
	for k, v := range map[string]string{"kubeconfig": c.Kubeconfig, "namespace": ns, "nodeName": c.NodeName, "cooldownSeconds": "1"} {
		sb.run(t, project, "pulumi", "config", "set", k, v)
	}
	sb.run(t, project, "pulumi", "preview", "--diff")
	t.Logf("pulumi up:\n%s", tail(sb.run(t, project, "pulumi", "up", "--yes", "--skip-preview"), 20))
	requireRolledAndLocked(t, viewStatefulSet(ctx, t, c, ns))
	e := attachExample(t, c, ns)
	term := e.Must(t).Term()

	sb.run(t, project, "pulumi", "config", "set", "podRevision", "2")
	preview := sb.run(t, project, "pulumi", "preview", "--diff")
	assert.Contains(t, preview, "roll etcd-2", "the preview shows the plan")
	up := sb.run(t, project, "pulumi", "up", "--yes", "--skip-preview")
	t.Logf("pulumi up of the template change:\n%s", tail(up, 30))
	requireRolledAndLocked(t, viewStatefulSet(ctx, t, c, ns))
	var outputs map[string]any
	require.NoError(t, json.Unmarshal([]byte(sb.run(t, project, "pulumi", "stack", "output", "--json")), &outputs))
	requireRolledWithoutElection(t, e, term, outputs)
	sb.run(t, project, "pulumi", "destroy", "--yes", "--skip-preview")
}

// watchProviderProcesses records the executable of every pulumi-resource-etcd-rollout process that runs until
// the returned function is called, which returns them.
func watchProviderProcesses(t *testing.T) func() []string {
	ctx, cancel := context.WithCancel(t.Context())
	found := map[string]bool{}
	done := make(chan struct{})
	go func() {
		defer close(done)
		for ctx.Err() == nil {
			entries, _ := os.ReadDir("/proc")
			for _, e := range entries {
				exe, err := os.Readlink(filepath.Join("/proc", e.Name(), "exe"))
				if err == nil && filepath.Base(exe) == "pulumi-resource-etcd-rollout" {
					found[exe] = true
				}
			}
			select {
			case <-ctx.Done():
			case <-time.After(100 * time.Millisecond):
			}
		}
	}()
	return func() []string {
		cancel()
		<-done
		var out []string
		for exe := range found {
			out = append(out, exe)
		}
		return out
	}
}

func copyFile(t *testing.T, src, dst string, mode os.FileMode) {
	t.Helper()
	b, err := os.ReadFile(src)
	require.NoError(t, err, "%s is missing: make test-install builds the tools first", src)
	require.NoError(t, os.WriteFile(dst, b, mode))
}
