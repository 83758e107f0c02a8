// Package plannertest builds the observed states the tests of the engine and its procedures start from. The
// planner's own tests keep their copy: a package's tests cannot import a package that imports it.
package plannertest

import (
	"fmt"

	"github.com/etcd-rollout/pulumi-etcd-rollout/rollout/internal/planner"
)

// The revisions of a roll: the members start at OldRev, the template is at NewRev.
const (
	OldRev = "etcd-old"
	NewRev = "etcd-new"
)

// HealthyState is n healthy voting members at the old revision, locked, with the leader on ordinal leader;
// the ordinals in updated are already at the new revision.
func HealthyState(n, leader int, updated ...int) planner.ClusterState {
	s := planner.ClusterState{Replicas: n, Partition: n, UpdateRevision: NewRev, CurrentRevision: OldRev, VotingMembers: n}
	for i := 0; i < n; i++ {
		s.Members = append(s.Members, planner.MemberState{
			Ordinal: i, Pod: fmt.Sprintf("etcd-%d", i), PodExists: true, Revision: OldRev, Ready: true,
			Reachable: true, MemberID: uint64(100 + i), IsLeader: i == leader, LeaderID: uint64(100 + leader), RaftTerm: 2, Healthy: true,
			Running: true,
		})
	}
	for _, u := range updated {
		s.Members[u].Revision = NewRev
	}
	return s
}
