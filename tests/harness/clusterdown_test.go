//go:build integration

package harness_test

import (
	"context"
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

// cluster-down leaves no process of ours behind. The test brings up a second, private cluster (its own run
// dir; up.sh moves every default port that the main cluster holds), gives it a 3-member etcd so that the
// member daemon has children, checks that a second cluster-up leaves a healthy cluster alone, runs
// cluster-down and then looks for any process that names the run dir.
func TestClusterDownLeavesNoProcess(t *testing.T) {
	root, err := harness.RepoRoot()
	require.NoError(t, err)
	runDir := filepath.Join(t.TempDir(), "run")
	script := func(name string) *exec.Cmd {
		cmd := exec.Command(filepath.Join(root, "tests", "cluster", name))
		cmd.Env = append(os.Environ(), "RUN_DIR="+runDir, "MEMBER_PORTS=29000-29999")
		return cmd
	}
	start := time.Now()
	out, err := script("up.sh").CombinedOutput()
	require.NoError(t, err, "up.sh:\n%s", out)
	t.Logf("private cluster up in %s", time.Since(start).Round(10*time.Millisecond))
	t.Cleanup(func() { _ = script("down.sh").Run() }) // only matters when an assertion below failed

	c, err := harness.Open(runDir)
	require.NoError(t, err)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	ns, err := c.CreateNamespace(ctx, "cluster-down")
	require.NoError(t, err)
	e, err := c.CreateEtcd(ctx, ns, harness.EtcdSpec{})
	require.NoError(t, err)
	members, err := e.Members(ctx)
	require.NoError(t, err)

	out, err = script("up.sh").CombinedOutput()
	require.NoError(t, err, "a second up.sh on a healthy cluster:\n%s", out)
	assert.Contains(t, string(out), "already up")

	pids := processesNaming(t, runDir)
	for _, m := range members {
		assert.Contains(t, pids, m.PID, "member %s is one of the processes found", m.Pod)
	}
	// etcd, kube-apiserver, kube-controller-manager, kwok, etcd-members and 3 members
	require.GreaterOrEqual(t, len(pids), 8, "processes of the private cluster")

	start = time.Now()
	out, err = script("down.sh").CombinedOutput()
	require.NoError(t, err, "down.sh (exit 1 means it found and killed a leaked process):\n%s", out)
	t.Logf("private cluster down in %s", time.Since(start).Round(10*time.Millisecond))
	assert.Empty(t, processesNaming(t, runDir), "processes left after down.sh")
	for _, pid := range pids {
		assert.True(t, exited(pid), "process %d is gone", pid)
	}
}

// exited is true when pid is gone or a zombie (exited; its reaper, pid 1 here, collects it seconds later).
func exited(pid int) bool {
	stat, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "stat"))
	if err != nil {
		return true
	}
	// pid (comm) state ...: comm may hold spaces, so read the field after the last ')'.
	rest := string(stat[strings.LastIndexByte(string(stat), ')')+1:])
	return strings.HasPrefix(strings.TrimSpace(rest), "Z")
}

// processesNaming lists the processes whose command line contains dir/.
func processesNaming(t *testing.T, dir string) []int {
	t.Helper()
	entries, err := os.ReadDir("/proc")
	require.NoError(t, err)
	var out []int
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid == os.Getpid() {
			continue
		}
		cmdline, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if err == nil && strings.Contains(string(cmdline), dir+"/") {
			out = append(out, pid)
		}
	}
	return out
}
