//go:build integration

package engine_test

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/etcd-rollout/pulumi-etcd-rollout/tests/harness"
)

// rollWithLeaderOn rolls a fresh template with the leader first placed on each ordinal in turn, and checks
// the outcome against both the engine's report and the members' own raft terms.
func rollWithLeaderOn(t *testing.T, spec harness.EtcdSpec, leaders []int) {
	f := newFixture(t, spec)
	n := f.etcd.Spec.Replicas
	for i, leader := range leaders {
		t.Run(fmt.Sprintf("leader on %d", leader), func(t *testing.T) {
			f.t = t
			rev := f.must.ChangeTemplate(label(i))
			f.must.PlaceLeader(leader)
			before := f.must.Term()

			res, err := f.engine(nil).Run(runCtx(t))
			require.NoError(t, err)
			t.Logf("result: %s", res.Summary())

			f.requireRolledTo(rev)
			assert.Len(t, res.MembersRolled, n)
			assert.Equal(t, rev, res.UpdateRevision)
			assert.Equal(t, 0, res.UnplannedElections)
			for _, m := range res.Members {
				// Read from the member's /metrics over the same transport (and TLS) as every other call: without it
				// a restart between two looks goes unseen and an unreachable member counts as a failed one.
				assert.NotEmpty(t, m.Process, "%s named its etcd process", m.Pod)
			}
			if leader == n-1 {
				assert.Equal(t, 2, res.LeaderTransfers, "the leader starts on the first member to roll")
			} else {
				assert.LessOrEqual(t, res.LeaderTransfers, 1)
			}
			// Independent of the engine's own count: every term increase is one of its transfers.
			assert.Equal(t, before+uint64(res.LeaderTransfers), f.must.Term(), "raft term rose only by the transfers")
		})
	}
}

func TestRollThreeMembersHTTP(t *testing.T) {
	t.Parallel()
	rollWithLeaderOn(t, httpSpec, []int{2, 1, 0})
}

func TestRollThreeMembersTLS(t *testing.T) {
	t.Parallel()
	rollWithLeaderOn(t, mtlsSpec, []int{2, 1, 0})
}

// Five members, the leader on each ordinal in turn; split over two clusters so the suite's wall time stays
// near the longest three-member test.
func TestRollFiveMembersLeaderHigh(t *testing.T) {
	t.Parallel()
	rollWithLeaderOn(t, fiveMembers(), []int{4, 3, 2})
}

func TestRollFiveMembersLeaderLow(t *testing.T) {
	t.Parallel()
	rollWithLeaderOn(t, fiveMembers(), []int{1, 0})
}

func fiveMembers() harness.EtcdSpec {
	spec := httpSpec
	spec.Replicas = 5
	return spec
}
