//go:build integration

package engine_test

import (
	"context"
	"errors"
	"os/exec"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/etcd-rollout/pulumi-etcd-rollout/tests/harness"
)

// A cluster on etcd 3.5.21 given a 3.6 template: `etcd-rollout run`, which has no Check, is refused by the
// engine itself, because etcd supports upgrading to 3.6 only from 3.5.32 on. The members run a real 3.5.21
// binary, so the refusal rests on the version each member reports through its Status RPC, not on the image
// tag. The leader sits on etcd-2, the member the engine would roll first after moving the leader away: an
// engine that judged the path any later than its first disruption would have moved it.
func TestCLIRunRefusesAnUpgradeFromBelowThe36Floor(t *testing.T) {
	t.Parallel()
	bin := buildCLI(t)
	spec := httpSpec
	spec.Version = "3.5.21"
	f := newFixture(t, spec)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	for i := range f.etcd.Spec.Replicas {
		st, err := f.etcd.Status(ctx, i)
		require.NoError(t, err)
		require.Equal(t, "3.5.21", st.Version, "%s runs the 3.5.21 binary by its own word", f.etcd.PodName(i))
	}
	f.must.ChangeVersion("3.6", harness.StartFaults{})
	f.must.PlaceLeader(2)
	leaderBefore, termBefore, err := f.etcd.Leader(ctx)
	require.NoError(t, err)
	require.Equal(t, 2, leaderBefore)
	revsBefore, uidsBefore := f.must.Pods()

	start := time.Now()
	out, err := exec.CommandContext(ctx, bin, "run", "--sts", f.etcd.Spec.Name, "-n", f.etcd.Namespace,
		"--kubeconfig", f.c.Kubeconfig, "--cooldown", "0s").CombinedOutput()
	t.Logf("etcd-rollout run in %s:\n%s", time.Since(start).Round(time.Millisecond), out)
	var exit *exec.ExitError
	require.True(t, errors.As(err, &exit), "run must fail: %v", err)
	assert.Equal(t, 3, exit.ExitCode(), "exit code 3: blocked, nothing changed")
	assert.Contains(t, string(out), "cannot be rolled onto etcd-0, which runs registry.k8s.io/etcd:3.5.21-0 (etcd 3.5.21 by its own word)")
	assert.Contains(t, string(out), "etcd 3.5.21 -> 3.6.8: etcd supports upgrading to 3.6 only from 3.5.32 or later")

	assert.Equal(t, f.etcd.Spec.Replicas, f.must.Partition(), "partition still locked")
	revs, uids := f.must.Pods()
	assert.Equal(t, uidsBefore, uids, "no pod was restarted")
	assert.Equal(t, revsBefore, revs, "every pod still on the 3.5.21 revision")
	leader, term, err := f.etcd.Leader(ctx)
	require.NoError(t, err)
	assert.Equal(t, leaderBefore, leader, "the leader did not move")
	assert.Equal(t, termBefore, term, "no election and no leader transfer")
}
