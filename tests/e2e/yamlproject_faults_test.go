//go:build e2e && faults

package e2e

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/etcd-rollout/pulumi-etcd-rollout/tests/harness"
)

// yamlProject is a copy of a YAML example run with the plain pulumi CLI (the YAML language host is the one
// this machine can run), with the providers of this build and the pinned kubernetes plugin.
type yamlProject struct {
	dir, pulumi string
	env         map[string]string
}

func newYAMLProject(t *testing.T, p paths, example string) *yamlProject {
	t.Helper()
	dir := copyExample(t, filepath.Join(p.root, "examples", example), filepath.Join(t.TempDir(), example))
	f, err := os.OpenFile(filepath.Join(dir, "Pulumi.yaml"), os.O_APPEND|os.O_WRONLY, 0)
	require.NoError(t, err)
	_, err = fmt.Fprintf(f, "\nplugins:\n  providers:\n    - name: etcd-rollout\n      path: %s\n    - name: kubernetes\n      path: %s\n", p.pluginDir, p.k8sPlugin)
	require.NoError(t, err)
	require.NoError(t, f.Close())
	env, _ := pulumiEnv(t, p)
	return &yamlProject{dir: dir, pulumi: p.pulumi, env: env}
}

func (y *yamlProject) command(args ...string) *exec.Cmd {
	cmd := exec.Command(y.pulumi, append(args, "--non-interactive")...)
	cmd.Dir, cmd.Env = y.dir, os.Environ()
	for k, v := range y.env {
		cmd.Env = append(cmd.Env, k+"="+v)
	}
	return cmd
}

// run runs one pulumi command to its end and returns its output; it fails the test when the command fails.
func (y *yamlProject) run(t *testing.T, args ...string) string {
	t.Helper()
	out, err := y.command(args...).CombinedOutput()
	require.NoError(t, err, "pulumi %s:\n%s", strings.Join(args, " "), out)
	return string(out)
}

// fails runs one pulumi command that must fail and returns its output; it fails the test when the command
// succeeds.
func (y *yamlProject) fails(t *testing.T, args ...string) string {
	t.Helper()
	out, err := y.command(args...).CombinedOutput()
	require.Error(t, err, "pulumi %s succeeded:\n%s", strings.Join(args, " "), out)
	return string(out)
}

// start starts one pulumi command in a process group of its own, to be killed like a dying CI runner.
func (y *yamlProject) start(t *testing.T, args ...string) *driverProc {
	t.Helper()
	cmd := y.command(args...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	s := &driverProc{cmd: cmd, name: "pulumi", op: args[0], done: make(chan error, 1)}
	cmd.Stdout, cmd.Stderr = &s.stdout, &s.stderr
	require.NoError(t, cmd.Start())
	go func() { s.done <- cmd.Wait() }()
	return s
}

// newYAMLStack is newYAMLProject with a stack "e2e" whose config points the example at the local cluster
// (kubeconfig, namespace ns, the node) and sets config on top.
func newYAMLStack(t *testing.T, p paths, c *harness.Cluster, ns, example string, config map[string]string) *yamlProject {
	t.Helper()
	cli := newYAMLProject(t, p, example)
	cli.run(t, "stack", "init", "e2e")
	for k, v := range map[string]string{"kubeconfig": c.Kubeconfig, "namespace": ns, "nodeName": c.NodeName} {
		cli.run(t, "config", "set", k, v)
	}
	for k, v := range config {
		cli.run(t, "config", "set", k, v)
	}
	return cli
}

// upYAMLExample is a fresh namespace with example brought up in it through `pulumi up` (newYAMLStack's config
// and config on top): the StatefulSet at its update revision with the partition locked, and the etcd behind
// it, attached with spec (its name and service filled in) and healthy.
func upYAMLExample(t *testing.T, p paths, c *harness.Cluster, example string, config map[string]string, spec harness.EtcdSpec) (*yamlProject, *harness.Etcd, string) {
	t.Helper()
	ctx := t.Context()
	ns := c.Namespace(t)
	cli := newYAMLStack(t, p, c, ns, example, config)
	cli.run(t, "up", "--yes", "--skip-preview")
	requireRolledAndLocked(t, viewStatefulSet(ctx, t, c, ns))
	spec.Name, spec.ServiceName = "etcd", "etcd-headless"
	e, err := c.AttachEtcd(ns, spec)
	require.NoError(t, err)
	require.NoError(t, e.WaitHealthy(ctx))
	return cli, e, ns
}
