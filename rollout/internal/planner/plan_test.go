package planner

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/etcd-rollout/pulumi-etcd-rollout/rollout/internal/durability"
	"github.com/etcd-rollout/pulumi-etcd-rollout/rollout/internal/member"
	"github.com/etcd-rollout/pulumi-etcd-rollout/rollout/internal/selfremoval"
)

const (
	oldRev = "etcd-old"
	newRev = "etcd-new"
)

// healthyState is n healthy voting members at the old revision, locked, with the leader on ordinal leader;
// the ordinals in updated are already at the new revision.
func healthyState(n, leader int, updated ...int) ClusterState {
	s := ClusterState{Replicas: n, Partition: n, UpdateRevision: newRev, CurrentRevision: oldRev, VotingMembers: n}
	for i := 0; i < n; i++ {
		s.Members = append(s.Members, MemberState{
			Ordinal: i, Pod: fmt.Sprintf("etcd-%d", i), PodExists: true, Revision: oldRev, Ready: true,
			Reachable: true, MemberID: uint64(100 + i), IsLeader: i == leader, LeaderID: uint64(100 + leader), RaftTerm: 2, Healthy: true,
			Running: true,
		})
	}
	for _, u := range updated {
		s.Members[u].Revision = newRev
	}
	return s
}

func kinds(p Plan) []StepKind {
	out := make([]StepKind, len(p.Steps))
	for i, s := range p.Steps {
		out[i] = s.Kind
	}
	return out
}

// replay walks the plan like the executor would and fails when a member would restart while it is leader,
// or a transfer starts from a member that is not the leader: the plan's safety invariants.
func replay(t *testing.T, s ClusterState, p Plan) {
	t.Helper()
	leader := -1
	for _, m := range s.Members {
		if m.IsLeader {
			leader = m.Ordinal
		}
	}
	transfers := 0
	for _, st := range p.Steps {
		switch st.Kind {
		case StepTransferLeader:
			require.Equal(t, leader, st.From, "transfer must start at the current leader")
			require.NotEqual(t, st.From, st.To)
			leader = st.To
			transfers++
		case StepLowerPartition:
			require.NotEqual(t, leader, st.Ordinal, "the leader must never be the member restarted")
		}
	}
	require.Equal(t, p.Transfers, transfers)
}

func TestPlanLazyEveryLeaderPosition(t *testing.T) {
	for _, n := range []int{3, 5} {
		for leader := 0; leader < n; leader++ {
			t.Run(fmt.Sprintf("%d members leader on %d", n, leader), func(t *testing.T) {
				s := healthyState(n, leader)
				p, err := PlanRollout(s, LeaderLazy)
				require.NoError(t, err)
				replay(t, s, p)

				var order []int
				for i := n - 1; i >= 0; i-- {
					order = append(order, i)
				}
				assert.Equal(t, order, p.Roll)
				want := 1
				if leader == n-1 {
					want = 2
				}
				assert.Equal(t, want, p.Transfers)
				assert.Equal(t, StepRelock, p.Steps[len(p.Steps)-1].Kind)
			})
		}
	}
}

func TestPlanLazyTargets(t *testing.T) {
	tests := []struct {
		name   string
		state  ClusterState
		want   []Step
		string string
	}{
		{
			name:  "leader on N-1 goes to the lowest ordinal, then to an updated member",
			state: healthyState(3, 2),
			want: []Step{
				{Kind: StepTransferLeader, From: 2, To: 0},
				{Kind: StepLowerPartition, Ordinal: 2}, {Kind: StepWaitMember, Ordinal: 2},
				{Kind: StepCooldown, Ordinal: 1},
				{Kind: StepLowerPartition, Ordinal: 1}, {Kind: StepWaitMember, Ordinal: 1},
				{Kind: StepCooldown, Ordinal: 0},
				{Kind: StepTransferLeader, From: 0, To: 2},
				{Kind: StepLowerPartition, Ordinal: 0}, {Kind: StepWaitMember, Ordinal: 0},
				{Kind: StepRelock, Ordinal: 3},
			},
			string: "roll etcd-2, etcd-1, etcd-0 to revision etcd-new; move leader etcd-2 → etcd-0 before etcd-2, etcd-0 → etcd-2 before etcd-0; 2 leader transfers",
		},
		{
			name:  "leader on 1 moves once, to the updated member 2",
			state: healthyState(3, 1),
			want: []Step{
				{Kind: StepLowerPartition, Ordinal: 2}, {Kind: StepWaitMember, Ordinal: 2},
				{Kind: StepCooldown, Ordinal: 1},
				{Kind: StepTransferLeader, From: 1, To: 2},
				{Kind: StepLowerPartition, Ordinal: 1}, {Kind: StepWaitMember, Ordinal: 1},
				{Kind: StepCooldown, Ordinal: 0},
				{Kind: StepLowerPartition, Ordinal: 0}, {Kind: StepWaitMember, Ordinal: 0},
				{Kind: StepRelock, Ordinal: 3},
			},
			string: "roll etcd-2, etcd-1, etcd-0 to revision etcd-new; move leader etcd-1 → etcd-2 before etcd-1; 1 leader transfer",
		},
		{
			name:   "resume: member 2 passed in this run, leader on it, nothing moves",
			state:  proven(healthyState(3, 2, 2), 2),
			string: "roll etcd-1, etcd-0 to revision etcd-new; 0 leader transfers",
			want: []Step{
				{Kind: StepLowerPartition, Ordinal: 1}, {Kind: StepWaitMember, Ordinal: 1},
				{Kind: StepCooldown, Ordinal: 0},
				{Kind: StepLowerPartition, Ordinal: 0}, {Kind: StepWaitMember, Ordinal: 0},
				{Kind: StepRelock, Ordinal: 3},
			},
		},
		{
			name:   "resume by a new run: member 2 left by an earlier run proves itself first, and only then takes the leadership",
			state:  healthyState(3, 1, 2),
			string: "roll etcd-1, etcd-0 to revision etcd-new; wait for etcd-2 (already at etcd-new) to be healthy; move leader etcd-1 → etcd-2 before etcd-1; 1 leader transfer",
			want: []Step{
				{Kind: StepWaitMember, Ordinal: 2},
				{Kind: StepCooldown, Ordinal: 1},
				{Kind: StepTransferLeader, From: 1, To: 2},
				{Kind: StepLowerPartition, Ordinal: 1}, {Kind: StepWaitMember, Ordinal: 1},
				{Kind: StepCooldown, Ordinal: 0},
				{Kind: StepLowerPartition, Ordinal: 0}, {Kind: StepWaitMember, Ordinal: 0},
				{Kind: StepRelock, Ordinal: 3},
			},
		},
		{
			name:   "resume by a new run: both updated members prove themselves before member 0, which leads, rolls",
			state:  healthyState(3, 0, 2, 1),
			string: "roll etcd-0 to revision etcd-new; wait for etcd-2, etcd-1 (already at etcd-new) to be healthy; move leader etcd-0 → etcd-2 before etcd-0; 1 leader transfer",
			want: []Step{
				{Kind: StepWaitMember, Ordinal: 2},
				{Kind: StepCooldown, Ordinal: 1},
				{Kind: StepWaitMember, Ordinal: 1},
				{Kind: StepCooldown, Ordinal: 0},
				{Kind: StepTransferLeader, From: 0, To: 2},
				{Kind: StepLowerPartition, Ordinal: 0}, {Kind: StepWaitMember, Ordinal: 0},
				{Kind: StepRelock, Ordinal: 3},
			},
		},
		{
			name:   "resume: only member 0 left and it leads",
			state:  proven(healthyState(3, 0, 2, 1), 2, 1),
			string: "roll etcd-0 to revision etcd-new; move leader etcd-0 → etcd-2 before etcd-0; 1 leader transfer",
			want: []Step{
				{Kind: StepTransferLeader, From: 0, To: 2},
				{Kind: StepLowerPartition, Ordinal: 0}, {Kind: StepWaitMember, Ordinal: 0},
				{Kind: StepRelock, Ordinal: 3},
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p, err := PlanRollout(tt.state, LeaderLazy)
			require.NoError(t, err)
			assert.Equal(t, tt.want, p.Steps)
			assert.Equal(t, tt.string, p.String())
			replay(t, tt.state, p)
		})
	}
}

func TestPlanResumeEveryLeaderPosition(t *testing.T) {
	// After a cancel, any suffix of ordinals may already be updated, with the leader anywhere.
	for _, n := range []int{3, 5} {
		for done := 0; done < n; done++ {
			for leader := 0; leader < n; leader++ {
				var updated []int
				for i := n - 1; i >= n-done; i-- {
					updated = append(updated, i)
				}
				t.Run(fmt.Sprintf("%d members %d done leader on %d", n, done, leader), func(t *testing.T) {
					s := healthyState(n, leader, updated...)
					p, err := PlanRollout(s, LeaderLazy)
					require.NoError(t, err)
					replay(t, s, p)
					assert.Len(t, p.Roll, n-done)
					want := 0
					switch {
					case leader >= n-done: // on an updated member: never moves
					case leader == n-1-done && done == 0: // leads the first to roll and nothing is updated yet
						want = 2
					default:
						want = 1
					}
					assert.Equal(t, want, p.Transfers)
				})
			}
		}
	}
}

func TestPlanJobLike(t *testing.T) {
	for _, n := range []int{3, 5} {
		for leader := 0; leader < n; leader++ {
			t.Run(fmt.Sprintf("%d members leader on %d", n, leader), func(t *testing.T) {
				s := healthyState(n, leader)
				p, err := PlanRollout(s, LeaderJobLike)
				require.NoError(t, err)
				replay(t, s, p)
				want := 2
				if leader == 0 {
					want = 1
				}
				assert.Equal(t, want, p.Transfers)
				last := Step{}
				for _, st := range p.Steps {
					if st.Kind == StepTransferLeader {
						last = st
					}
				}
				assert.Equal(t, Step{Kind: StepTransferLeader, From: 0, To: n - 1}, last, "leader goes to N-1 before member 0")
			})
		}
	}
}

// proven marks members as the executor does for those it saw pass their gates in the current run.
func proven(s ClusterState, ordinals ...int) ClusterState {
	for _, i := range ordinals {
		s.Members[i].Proven = true
	}
	return s
}

func TestPlanNothingToDo(t *testing.T) {
	s := healthyState(3, 1, 0, 1, 2)
	s.CurrentRevision = newRev // every pod updated and Ready: the controller made the revision current
	p, err := PlanRollout(s, LeaderLazy)
	require.NoError(t, err)
	assert.Empty(t, p.Steps)
	assert.Equal(t, "nothing to roll: every member is at revision etcd-new and healthy", p.String())

	s.Partition = 1
	p, err = PlanRollout(s, LeaderLazy)
	require.NoError(t, err)
	assert.Equal(t, []StepKind{StepLock}, kinds(p))
	assert.Equal(t, "nothing to roll; re-lock the partition", p.String())
}

func TestPlanUnlockedPartitionIsRelockedFirst(t *testing.T) {
	s := healthyState(3, 0, 2)
	s.Partition = 2
	p, err := PlanRollout(s, LeaderLazy)
	require.NoError(t, err)
	assert.Equal(t, StepLock, p.Steps[0].Kind)
	assert.Equal(t, []int{1, 0}, p.Roll)
	assert.Contains(t, p.String(), "re-lock the partition first")
}

func TestPlanWaitsForUpdatedButUnhealthyMember(t *testing.T) {
	// A previous run timed out while etcd-2 was coming back at the new revision: wait for it, then go on.
	s := healthyState(3, 0, 2)
	s.Members[2].Healthy = false
	s.Members[2].Problem = "connection refused"
	p, err := PlanRollout(s, LeaderLazy)
	require.NoError(t, err)
	assert.Equal(t, []int{2}, p.Wait)
	assert.Equal(t, []int{1, 0}, p.Roll)
	assert.Equal(t, []StepKind{StepWaitMember, StepCooldown, StepLowerPartition, StepWaitMember, StepCooldown,
		StepTransferLeader, StepLowerPartition, StepWaitMember, StepRelock}, kinds(p))
	assert.Contains(t, p.String(), "wait for etcd-2 (already at etcd-new) to be healthy")
	replay(t, s, p)
}

func TestPlanBlocked(t *testing.T) {
	tests := []struct {
		name   string
		mutate func(*ClusterState)
		errMsg string
	}{
		{"no leader", func(s *ClusterState) { s.Members[1].IsLeader = false }, "the cluster has no leader"},
		{"learner in the member list, no replacement in flight", func(s *ClusterState) { s.Learners = 1 }, "which no replacement of this rollout added"},
		{"a member reports itself a learner", func(s *ClusterState) { s.Members[0].IsLearner = true }, "etcd-0 is a learner"},
		{"a member not voting", func(s *ClusterState) { s.VotingMembers = 2 }, "2 voting members but the StatefulSet has 3 replicas"},
		{"quorum lost with the next member down", func(s *ClusterState) {
			s.Members[0].Healthy = false
			s.Members[0].Problem = "stopped"
		}, "restarting etcd-2 would leave 1 healthy member(s), quorum is 2 of 3"},
		{"no replicas", func(s *ClusterState) { s.Replicas = 0; s.Members = nil }, "0 replicas"},
		{"controller has not observed the sts", func(s *ClusterState) { s.UpdateRevision = "" }, "no updateRevision"},
		{"two leaders", func(s *ClusterState) { s.Members[2].IsLeader = true }, "both etcd-1 and etcd-2 claim to be leader"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := healthyState(3, 1)
			tt.mutate(&s)
			_, err := PlanRollout(s, LeaderLazy)
			require.ErrorIs(t, err, ErrBlocked)
			assert.Contains(t, err.Error(), tt.errMsg)
		})
	}
}

func TestPlanQuorumGuard(t *testing.T) {
	t.Run("unhealthy target at the old revision can be replaced when the others hold quorum", func(t *testing.T) {
		s := healthyState(3, 0)
		s.Members[2].Healthy = false
		p, err := PlanRollout(s, LeaderLazy)
		require.NoError(t, err)
		assert.Equal(t, []int{2, 1, 0}, p.Roll)
	})
	t.Run("5 members tolerate one other member down", func(t *testing.T) {
		s := healthyState(5, 0)
		s.Members[1].Healthy = false
		_, err := PlanRollout(s, LeaderLazy)
		require.NoError(t, err)
	})
	t.Run("5 members refuse with two others down", func(t *testing.T) {
		s := healthyState(5, 0)
		s.Members[1].Healthy = false
		s.Members[2].Healthy = false
		_, err := PlanRollout(s, LeaderLazy)
		require.ErrorIs(t, err, ErrBlocked)
	})
	t.Run("a single member rolls only with consent to the write outage", func(t *testing.T) {
		s := healthyState(1, 0)
		p, err := PlanRollout(s, LeaderLazy)
		require.NoError(t, err, "the plan says what the consent would run")
		assert.Equal(t, []int{0}, p.Roll)
		assert.Zero(t, p.Transfers, "nobody to move the leader to")
		require.NotNil(t, p.WriteOutage)
		assert.Equal(t, "etcd-0", p.WriteOutage.Pod)
		require.NotNil(t, p.Snapshot)
		assert.True(t, p.Snapshot.Required, "no peer holds its data: a snapshot first, always")
		err = CheckConsents(s, p, Consents{})
		require.ErrorIs(t, err, ErrBlocked)
		require.ErrorIs(t, err, ErrSingleMember, "a block waiting cannot fix")
		assert.Contains(t, err.Error(), "quorum 1 of 1")
		require.NoError(t, CheckConsents(s, p, Consents{WriteOutage: true}))
	})
	t.Run("a single member held back is refused without consent too", func(t *testing.T) {
		s := healthyState(1, 0)
		s.Members[0].Healthy, s.Members[0].Reachable, s.Members[0].IsLeader = false, false, false
		p, err := PlanRollout(s, LeaderLazy)
		require.ErrorIs(t, err, ErrBlocked)
		require.ErrorIs(t, CheckConsents(s, p, Consents{}), ErrSingleMember, "waiting changes nothing of the consent")
	})
}

func TestPlanStringIsStable(t *testing.T) {
	s := healthyState(5, 4)
	a, err := PlanRollout(s, LeaderLazy)
	require.NoError(t, err)
	b, err := PlanRollout(s, LeaderLazy)
	require.NoError(t, err)
	assert.Equal(t, a.String(), b.String())
	assert.Equal(t, "roll etcd-4, etcd-3, etcd-2, etcd-1, etcd-0 to revision etcd-new; move leader etcd-4 → etcd-0 before etcd-4, etcd-0 → etcd-4 before etcd-0; 2 leader transfers", a.String())
	assert.Contains(t, a.Detail(), " 1. move the Raft leader etcd-4 → etcd-0\n")
}

func TestPlanRejectsUnknownPolicy(t *testing.T) {
	_, err := PlanRollout(healthyState(3, 0), LeaderPolicy("random"))
	require.Error(t, err)
	assert.Contains(t, err.Error(), `unknown leader policy "random"`)
}

// The leader goes only to a member that needs no proof: one at the update revision that no run saw pass may
// crash-loop, and leading it would cost an election when it does (issue 31's audit: the fallback target and the
// job-like first move skipped the check). When no member is left to lead, the quorum rule has blocked already:
// the members that need proof count for no quorum (checkQuorum).
func TestTheLeaderNeverGoesToAnUnprovenMember(t *testing.T) {
	tests := []struct {
		name   string
		policy LeaderPolicy
		state  ClusterState
		wantTo int // the first transfer's target
	}{
		// etcd-0 at the update revision, not seen passing (an earlier run's reverts left the others back). It is
		// waited for first (workOrder), so by the first transfer it has passed: leading it costs nothing.
		{"lazy: the lowest healthy member is unproven", LeaderLazy, healthyState(5, 4, 0), 0},
		{"job-like: member 0 is unproven", LeaderJobLike, healthyState(5, 3, 0), 4},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p, err := PlanRollout(tt.state, tt.policy)
			require.NoError(t, err)
			waited := map[int]bool{}
			for _, st := range p.Steps {
				switch st.Kind {
				case StepWaitMember:
					waited[st.Ordinal] = true
				case StepTransferLeader:
					assert.Equal(t, tt.wantTo, st.To, "first transfer: %v", p.Steps)
					assert.False(t, NeedsProof(tt.state, tt.state.Members[st.To]) && !waited[st.To], "the leader goes to a member that needs proof before it passed: %v", p.Steps)
					return
				}
			}
			t.Fatalf("no transfer planned: %v", p.Steps)
		})
	}
}

// A roll held back because no member answers yet still refuses a hook that removes members at once: waiting
// does not change the hook.
func TestCheckSelfRemovalWhileTheRollIsHeldBack(t *testing.T) {
	bitnami := selfremoval.Hook{Container: "etcd", Command: "/opt/bitnami/scripts/etcd/prestop.sh", TurnOff: "removeMemberOnContainerTermination: false"}
	s := healthyState(3, 0)
	s.SelfRemoval = []selfremoval.Hook{bitnami}
	for i := range s.Members {
		s.Members[i].Healthy, s.Members[i].Reachable, s.Members[i].Problem = false, false, "connection refused"
	}
	p, err := PlanRollout(s, LeaderLazy)
	require.ErrorIs(t, err, ErrBlocked, "held back: nobody answers")
	err = CheckSelfRemoval(s, p, false)
	require.ErrorIs(t, err, ErrPreStopRemovesMember)
	assert.NoError(t, CheckSelfRemoval(s, p, true), "accepted")
}

// A member only waited for (left on the update revision by an earlier run, unproven, or down there) is waited
// for before anything is restarted, whatever its ordinal: it was disrupted already, and one member is disrupted at
// a time (the schedule checker's seed 14368 of 100,000: etcd-4 was restarted while etcd-3 crash-looped, waiting
// its turn behind it).
func TestAMemberOnlyWaitedForGoesBeforeAnyRestart(t *testing.T) {
	down := func(s ClusterState, i int) ClusterState {
		s.Members[i].Healthy, s.Members[i].Reachable = false, false
		return s
	}
	tests := []struct {
		name  string
		state ClusterState
		want  []Step
	}{
		{"unproven below the next restart", healthyState(5, 0, 3), []Step{{Kind: StepWaitMember, Ordinal: 3}, {Kind: StepCooldown, Ordinal: 4}, {Kind: StepLowerPartition, Ordinal: 4}}},
		{"two unproven, the higher first", healthyState(5, 0, 1, 3), []Step{{Kind: StepWaitMember, Ordinal: 3}, {Kind: StepCooldown, Ordinal: 1}, {Kind: StepWaitMember, Ordinal: 1}}},
		{"down on the update revision below the next restart", down(healthyState(5, 0, 2), 2), []Step{{Kind: StepWaitMember, Ordinal: 2}, {Kind: StepCooldown, Ordinal: 4}, {Kind: StepLowerPartition, Ordinal: 4}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p, err := PlanRollout(tt.state, LeaderLazy)
			require.NoError(t, err)
			require.GreaterOrEqual(t, len(p.Steps), len(tt.want))
			assert.Equal(t, tt.want, p.Steps[:len(tt.want)])
		})
	}
}

// Members whose data dies with their pod are replaced, not restarted, and what a replacement cannot do safely
// is refused before anything is touched: a data dir and a WAL dir of different durability, a single member,
// a template that would found a new cluster.
func TestMembersWhoseDataDiesWithThePodArePlannedAsReplacements(t *testing.T) {
	dir := func(kind durability.Kind, why string) durability.Dir {
		return durability.Dir{Role: "data dir", Path: "/var/lib/etcd", Volume: "data", Kind: kind, Why: why}
	}
	emptyDir := dir(durability.DiesWithPod, `the data dir /var/lib/etcd is on emptyDir volume "data" mounted at /var/lib/etcd`)
	tests := []struct {
		name         string
		dirs         []durability.Dir
		members      int
		clusterState string
		updated      []int
		wantKinds    []StepKind // the restart steps, in order
		refused      string
	}{
		{"on a claim: restarts", []durability.Dir{dir(durability.SurvivesPod, "")}, 3, "", nil, []StepKind{StepLowerPartition, StepLowerPartition, StepLowerPartition}, ""},
		{"unknown: restarts", []durability.Dir{dir(durability.Unknown, "")}, 3, "", nil, []StepKind{StepLowerPartition, StepLowerPartition, StepLowerPartition}, ""},
		{"on an emptyDir: replaced", []durability.Dir{emptyDir}, 3, "existing", nil, []StepKind{StepReplace, StepReplace, StepReplace}, ""},
		{"the data dir on a claim, the WAL dir on no volume", []durability.Dir{dir(durability.SurvivesPod, "the data dir is on a claim"), {Role: "WAL dir", Kind: durability.DiesWithContainer, Why: "the WAL dir is on no volume"}}, 3, "", nil, nil,
			"the WAL dir is on no volume, but the data dir is on a claim: a member's replacement would lose one and keep the other"},
		{"one member", []durability.Dir{emptyDir}, 1, "", nil, nil, "the only member's data dies with its pod"},
		{"a template that founds a new cluster", []durability.Dir{emptyDir}, 3, "new", nil, nil, "the template starts etcd with --initial-cluster-state=new"},
		{"on an emptyDir, nothing to roll", []durability.Dir{emptyDir}, 3, "new", []int{0, 1, 2}, nil, ""},
		{"on a hostPath of a pinned pod: restarts", []durability.Dir{dir(durability.SameNodeOnly, "hostPath of a pod pinned to one node")}, 3, "", nil, []StepKind{StepLowerPartition, StepLowerPartition, StepLowerPartition}, ""},
		{"on a hostPath of a pod on any node: refused", []durability.Dir{dir(durability.AnyNode, `the data dir /var/lib/etcd is on hostPath volume "data" (/srv/etcd) of a pod not pinned to one node`)}, 3, "", nil, nil,
			"of a pod not pinned to one node: a member restarted on another node finds no data"},
		{"on a hostPath of a pod on any node, nothing to roll", []durability.Dir{dir(durability.AnyNode, "")}, 3, "", []int{0, 1, 2}, nil, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := healthyState(tt.members, 0, tt.updated...)
			if len(tt.updated) == tt.members {
				s.CurrentRevision = s.UpdateRevision
			}
			s.Durability, s.TemplateInitialClusterState = tt.dirs, tt.clusterState
			p, err := PlanRollout(s, LeaderLazy)
			if tt.refused != "" {
				require.ErrorIs(t, err, ErrDataDiesWithPod)
				assert.NotErrorIs(t, err, ErrBlocked, "not a state to wait out")
				assert.Contains(t, err.Error(), tt.refused)
				return
			}
			require.NoError(t, err)
			var kinds []StepKind
			for _, st := range p.Steps {
				if st.Kind == StepLowerPartition || st.Kind == StepReplace {
					kinds = append(kinds, st.Kind)
				}
			}
			assert.Equal(t, tt.wantKinds, kinds)
		})
	}
}

// Pods whose preStop hook removes their own member are not rolled unless the user accepts it: the running
// pods' hook is what runs when the roll stops them, the template's at every later restart.
func TestARollOfPodsThatRemoveTheirOwnMemberNeedsConsent(t *testing.T) {
	bitnami := selfremoval.Hook{Container: "etcd", Command: "/opt/bitnami/scripts/etcd/prestop.sh", TurnOff: "the Bitnami etcd chart's removeMemberOnContainerTermination: false"}
	script := selfremoval.Hook{Container: "etcd", Command: "/bin/sh -ec etcdctl member remove $(member_hash)"}
	tests := []struct {
		name     string
		template []selfremoval.Hook
		pods     []selfremoval.Hook // on every running pod
		updated  []int
		accepted bool
		want     string // "" when the plan goes ahead
	}{
		{"no hook", nil, nil, nil, false, ""},
		{"the Bitnami hook on the pods and the template", []selfremoval.Hook{bitnami}, []selfremoval.Hook{bitnami}, nil, false,
			"etcd-2's pod runs `/opt/bitnami/scripts/etcd/prestop.sh` in container etcd's preStop hook, so every restart would remove a voter with no quorum check, racing this rollout, and add it back as a voter; turn the hook off (the Bitnami etcd chart's removeMemberOnContainerTermination: false), then roll with acceptPreStopMemberRemoval: true"},
		{"the template turned it off; the running pods still have it", nil, []selfremoval.Hook{bitnami}, nil, false,
			"the template no longer has it, but the running pods do, and their hook runs when the roll stops them, then roll with acceptPreStopMemberRemoval: true"},
		{"a new template adds a hook", []selfremoval.Hook{script}, nil, nil, false,
			"the pod template runs `/bin/sh -ec etcdctl member remove $(member_hash)` in container etcd's preStop hook"},
		{"accepted", []selfremoval.Hook{bitnami}, []selfremoval.Hook{bitnami}, nil, true, ""},
		{"nothing to roll", []selfremoval.Hook{bitnami}, []selfremoval.Hook{bitnami}, []int{0, 1, 2}, false, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := healthyState(3, 0, tt.updated...)
			if len(tt.updated) == 3 {
				s.CurrentRevision = s.UpdateRevision
			}
			s.SelfRemoval = tt.template
			for i := range s.Members {
				s.Members[i].SelfRemoval = tt.pods
			}
			p, err := PlanRollout(s, LeaderLazy)
			require.NoError(t, err)
			err = CheckSelfRemoval(s, p, tt.accepted)
			if tt.want == "" {
				assert.NoError(t, err)
				return
			}
			require.ErrorIs(t, err, ErrPreStopRemovesMember)
			assert.NotErrorIs(t, err, ErrBlocked, "not a state to wait out")
			assert.Contains(t, err.Error(), tt.want)
		})
	}
}

// When every member's certificate is refused alike, the blocked line says the cause once and names the
// members, instead of each member's full reason (review 3: 2,403 characters for three members).
func TestARefusalEveryMemberMetIsSaidOnce(t *testing.T) {
	s := healthyState(3, 0)
	for i := range s.Members {
		refused := &member.MemberCertError{Member: s.Members[i].Pod}
		s.Members[i].Reachable, s.Members[i].Healthy, s.Members[i].IsLeader = false, false, false
		s.Members[i].Problem, s.Members[i].Reason, s.Members[i].CertRefusal = refused.Error(), ProblemCertificateRefused, refused.SharedCause()
	}
	_, err := PlanRollout(s, LeaderLazy)
	require.ErrorIs(t, err, ErrBlocked)
	assert.Equal(t, "rollout blocked: no etcd member answered: etcd-0, etcd-1, etcd-2: each presented no TLS certificate", err.Error())
	var shared *MemberProblemError
	require.ErrorAs(t, err, &shared)
	assert.True(t, shared.Reason.WaitingCannotFix())
	assert.True(t, WaitingCannotFix(err), "the run returns it at once, said once, without holding for its timeout")

	s.Members[1].CertRefusal = ""
	_, err = PlanRollout(s, LeaderLazy)
	assert.Contains(t, err.Error(), "no etcd member answered (etcd-0 unhealthy: member etcd-0 presented no TLS certificate; etcd-1", "different problems are each said")
}
