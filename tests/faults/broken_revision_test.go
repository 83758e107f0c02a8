//go:build faults

package faults_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"

	"github.com/etcd-rollout/pulumi-etcd-rollout/rollout"
)

// A revision whose member never becomes healthy stops the run at that member with a timeout naming the
// member and the gate; no other member is touched and the partition is re-locked. By default (onFailure
// revert) the member is then brought back on the old revision and healthy; with onFailure stop it is left
// on the broken one.
func TestNeverHealthyRevisionStopsAtTheFirstMember(t *testing.T) {
	t.Parallel()
	for _, policy := range []rollout.FailurePolicy{rollout.FailureStop, rollout.FailureRevert} {
		t.Run(string(policy), func(t *testing.T) {
			t.Parallel()
			f := newFixture(t)
			revsBefore, uidsBefore := f.must.Pods()
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			rev, err := f.etcd.UpdateTemplate(ctx, func(tpl *corev1.PodTemplateSpec) {
				tpl.Annotations["etcd-rollout.test/broken"] = "true"
			})
			require.NoError(t, err)

			res, err := f.engine(func(cfg *rollout.Config, _ *rollout.Options) {
				cfg.ReadyTimeout = 15 * time.Second
				cfg.HealthTimeout = 8 * time.Second
				cfg.OnFailure = policy
			}).Run(runCtx(t))
			var gate *rollout.GateTimeoutError
			require.ErrorAs(t, err, &gate, "got %v", err)
			t.Logf("error: %v", err)
			assert.Equal(t, "etcd-2", gate.Pod)
			assert.Contains(t, []string{rollout.GatePodReady, rollout.GateEtcdHealth}, gate.Gate)
			assert.Empty(t, res.MembersRolled)
			require.NotNil(t, res.Failure)
			assert.Equal(t, rev, res.Failure.Revision)
			require.Equal(t, 3, f.must.Partition(), "re-locked")
			revs, uidsAfter := f.must.Pods()
			assert.Equal(t, []int{2}, restarted(uidsBefore, uidsAfter), "etcd-2 was the one tried, no other member touched")
			assert.NotEqual(t, rev, revs[1])
			assert.NotEqual(t, rev, revs[0])

			if policy == rollout.FailureStop {
				assert.Contains(t, err.Error(), "etcd-2 did not pass the "+gate.Gate+" gate within")
				assert.Contains(t, err.Error(), "the partition is locked again, so no other member restarts: look at etcd-2")
				assert.Equal(t, rev, revs[2], "left on the broken revision")
				return // etcd-2 stays broken: the namespace goes with the test; quorum held on the other two
			}
			var reverted *rollout.RevertedError
			require.ErrorAs(t, err, &reverted)
			assert.Contains(t, err.Error(), "reverted etcd-2 to "+revsBefore[2]+": revision "+rev+" failed the "+gate.Gate+" gate")
			assert.Equal(t, revsBefore, revs, "etcd-2 back on the old revision")
			assert.Equal(t, revsBefore[2], res.Failure.RevertedTo)
			require.NoError(t, f.etcd.WaitHealthy(ctx), "every member healthy after the revert")
		})
	}
}
