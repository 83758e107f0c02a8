//go:build integration

package engine_test

import (
	"context"
	"errors"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/etcd-rollout/pulumi-etcd-rollout/tests/harness"
)

// The operators' CLI end to end: plan, run, a no-op run, and the exit code of a refused run.
func TestCLI(t *testing.T) {
	t.Parallel()
	bin := buildCLI(t)
	f := newFixture(t, httpSpec)
	cli := func(args ...string) (string, int) {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
		defer cancel()
		args = append(args, "--sts", f.etcd.Spec.Name, "-n", f.etcd.Namespace, "--kubeconfig", f.c.Kubeconfig, "--cooldown", "0s")
		out, err := exec.CommandContext(ctx, bin, args...).CombinedOutput()
		var exit *exec.ExitError
		if errors.As(err, &exit) {
			return string(out), exit.ExitCode()
		}
		require.NoError(t, err)
		return string(out), 0
	}

	rev := f.must.ChangeTemplate(label(0))
	f.must.PlaceLeader(1)
	out, code := cli("plan")
	require.Equal(t, 0, code, out)
	assert.Contains(t, out, "Plan: roll etcd-2, etcd-1, etcd-0 to revision "+rev+"; move leader etcd-1 → etcd-2 before etcd-1; 1 leader transfer")

	out, code = cli("run")
	require.Equal(t, 0, code, out)
	assert.Contains(t, out, "Rollout complete: 3 members rolled")
	assert.Contains(t, out, "unplanned elections:  0")
	f.requireRolledTo(rev)

	out, code = cli("run")
	require.Equal(t, 0, code, out)
	assert.Contains(t, out, "no member rolled")

	out, code = cli("status")
	require.Equal(t, 0, code, out)
	assert.Contains(t, out, "partition 3 (locked)")
	assert.Contains(t, out, "Rollout lease etcd-etcd-rollout: free")

	f.must.ChangeTemplate(label(1))
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	require.NoError(t, f.etcd.Freeze(ctx, 0))
	defer func() { require.NoError(t, f.etcd.Thaw(context.Background(), 0)) }()
	// Before its first disruption a blocked run holds for up to the ready timeout (5 min by default).
	out, code = cli("run", "--ready-timeout", "5s")
	assert.Equal(t, 3, code, "blocked: %s", out)
	assert.Contains(t, out, "rollout blocked")
}

func buildCLI(t *testing.T) string {
	t.Helper()
	root, err := harness.RepoRoot()
	require.NoError(t, err)
	bin := filepath.Join(t.TempDir(), "etcd-rollout")
	build := exec.Command("go", "build", "-o", bin, "./cmd/etcd-rollout")
	build.Dir = root
	out, err := build.CombinedOutput()
	require.NoError(t, err, "%s", out)
	return bin
}
