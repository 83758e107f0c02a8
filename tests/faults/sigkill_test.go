//go:build faults

package faults_test

import (
	"bufio"
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/etcd-rollout/pulumi-etcd-rollout/tests/harness"
)

// The process running the rollout (the CLI, bin/etcd-rollout) is SIGKILLed while a member is in flight: no
// deferred re-lock runs, so the partition stays lowered and the Lease stays held — the window
// docs/reliability.md describes. The next run is not refused: it watches the dead run's Lease for one lease
// duration, sees no renewal, takes it over, re-locks the partition before anything else, and finishes the
// members that are left.
func TestSIGKILLedRunIsTakenOverAndRelockedFirst(t *testing.T) {
	t.Parallel()
	bin := cliBinary(t)
	f := newFixture(t)
	args := []string{"--sts", f.etcd.Spec.Name, "-n", f.etcd.Namespace, "--kubeconfig", f.c.Kubeconfig,
		"--cooldown", "0s", "--lease-duration", "4s"}
	rev := f.must.ChangeTemplate("")
	_, uidsBefore := f.must.Pods()

	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	// "partition lowered to 1;" comes before etcd-1 is recreated and the partition re-locked.
	pid := killCLIAt(ctx, t, bin, append([]string{"run"}, args...), "partition lowered to 1;")
	assert.Equal(t, 1, f.must.Partition(), "no re-lock after SIGKILL")
	probe := f.engine(nil)
	holder, _, err := probe.LeaseHolder(ctx)
	require.NoError(t, err)
	require.NotEmpty(t, holder, "the killed run's lease is still held")
	assert.Contains(t, holder, "/"+strconv.Itoa(pid), "held by the killed process")

	out, code := runCLI(ctx, t, bin, append([]string{"run"}, args...)...)
	require.Equal(t, 0, code, "%s", out)
	watched := strings.Index(out, "is held by "+holder+": watching it for up to")
	takeover := strings.Index(out, "took over the stale lease of "+holder)
	relock := strings.Index(out, "partition left at 1 by "+holder+"; re-locking it before anything else")
	plan := strings.Index(out, "plan:")
	require.NotEqual(t, -1, watched, out)
	require.NotEqual(t, -1, takeover, out)
	assert.Less(t, watched, takeover, "watched the dead run's lease before taking it over")
	require.NotEqual(t, -1, relock, out)
	assert.Less(t, relock, plan, "re-locked before planning")
	assert.Contains(t, out, "unplanned elections:  0")
	assert.NotContains(t, out, "restarting etcd-2", "etcd-2 was finished by the killed run")
	f.requireState(rev)
	_, uidsAfter := f.must.Pods()
	assert.Equal(t, []int{0, 1, 2}, restarted(uidsBefore, uidsAfter))
}

// killCLIAt runs the CLI and SIGKILLs it as soon as it prints a line containing marker, so no deferred
// clean-up of it runs; it returns the killed process's pid and fails the test if the marker never came.
func killCLIAt(ctx context.Context, t *testing.T, bin string, args []string, marker string) int {
	t.Helper()
	run := exec.CommandContext(ctx, bin, args...)
	stdout, err := run.StdoutPipe()
	require.NoError(t, err)
	require.NoError(t, run.Start())
	killed := false
	for lines := bufio.NewScanner(stdout); lines.Scan(); {
		t.Log(lines.Text())
		if strings.Contains(lines.Text(), marker) {
			require.NoError(t, run.Process.Kill())
			killed = true
			break
		}
	}
	_ = run.Wait()
	require.True(t, killed, "the run ended before it printed %q", marker)
	return run.Process.Pid
}

// cliBinary is bin/etcd-rollout as `make etcd-rollout` builds it (make test-faults builds it first).
func cliBinary(t *testing.T) string {
	t.Helper()
	root, err := harness.RepoRoot()
	require.NoError(t, err)
	bin := filepath.Join(root, "bin", "etcd-rollout")
	_, err = os.Stat(bin)
	require.NoError(t, err, "run make etcd-rollout first")
	return bin
}

// runCLI runs the CLI and returns its combined output and exit code.
func runCLI(ctx context.Context, t *testing.T, bin string, args ...string) (string, int) {
	t.Helper()
	out, err := exec.CommandContext(ctx, bin, args...).CombinedOutput()
	t.Logf("$ etcd-rollout %s\n%s", strings.Join(args, " "), out)
	var exit *exec.ExitError
	if errors.As(err, &exit) {
		return string(out), exit.ExitCode()
	}
	require.NoError(t, err)
	return string(out), 0
}
