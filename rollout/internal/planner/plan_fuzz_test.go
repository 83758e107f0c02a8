package planner

import (
	"sort"
	"testing"

	"github.com/stretchr/testify/require"
)

// FuzzPlanRollout drives the planner with arbitrary member sets and checks the invariants every plan must
// keep: no member restarts while it leads, transfers start at the leader, members roll from the highest
// ordinal down and each outdated member exactly once, and a refused plan says why.
func FuzzPlanRollout(f *testing.F) {
	f.Add(uint8(3), uint8(2), uint16(0), uint16(0), uint16(0), false)
	f.Add(uint8(5), uint8(0), uint16(0b00011), uint16(0), uint16(0), true)
	f.Add(uint8(3), uint8(1), uint16(0b100), uint16(0b001), uint16(0), false)
	f.Add(uint8(1), uint8(0), uint16(0), uint16(0), uint16(0), false)
	f.Fuzz(func(t *testing.T, n, leader uint8, updated, unhealthy, unreachable uint16, jobLike bool) {
		replicas := int(n%7) + 1
		s := healthyState(replicas, int(leader)%(replicas+1)) // leader == replicas: no leader
		for i := range s.Members {
			m := &s.Members[i]
			if updated&(1<<i) != 0 {
				m.Revision = newRev
			}
			if unhealthy&(1<<i) != 0 {
				m.Healthy = false
			}
			if unreachable&(1<<i) != 0 {
				m.Reachable, m.Healthy, m.IsLeader = false, false, false
			}
		}
		policy := LeaderLazy
		if jobLike {
			policy = LeaderJobLike
		}
		p, err := PlanRollout(s, policy)
		if err != nil {
			require.ErrorIs(t, err, ErrBlocked)
			require.NotEmpty(t, err.Error())
			return
		}
		_ = p.String()
		replay(t, s, p)

		var outdated []int
		for i := replicas - 1; i >= 0; i-- {
			if s.Members[i].Revision != newRev {
				outdated = append(outdated, i)
			}
		}
		require.Equal(t, len(outdated), len(p.Roll))
		if len(outdated) > 0 {
			require.Equal(t, outdated, p.Roll)
		}
		require.True(t, sort.SliceIsSorted(p.Roll, func(a, b int) bool { return p.Roll[a] > p.Roll[b] }))
		rolled := map[int]bool{}
		for _, st := range p.Steps {
			switch st.Kind {
			case StepWaitMember:
				rolled[st.Ordinal] = true
			case StepTransferLeader:
				require.True(t, s.Members[st.To].Healthy || rolled[st.To],
					"a transfer goes to a healthy member or one whose gate has passed earlier in the plan")
			}
		}
	})
}
