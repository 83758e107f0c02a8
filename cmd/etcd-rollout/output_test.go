package main

import (
	"bytes"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/etcd-rollout/pulumi-etcd-rollout/rollout"
)

// outputState is a locked 3-member cluster, leader etcd-1, none rolled yet.
func outputState() rollout.ClusterState {
	st := rollout.ClusterState{Replicas: 3, Partition: 3, UpdateRevision: "etcd-new", CurrentRevision: "etcd-old",
		ClusterVersion: "3.6.0", VotingMembers: 3}
	for i := 0; i < 3; i++ {
		st.Members = append(st.Members, rollout.MemberState{Ordinal: i, Pod: []string{"etcd-0", "etcd-1", "etcd-2"}[i], PodExists: true,
			Revision: "etcd-old", Ready: true, Reachable: true, Healthy: true, IsLeader: i == 1, MemberID: uint64(i + 1), LeaderID: 2,
			RaftTerm: 4, RaftIndex: 120, AppliedIndex: 120, ServerVersion: "3.6.8", StorageVersion: "3.6.0"})
	}
	return st
}

// The documents of `status -o` and `plan -o` are a contract with scripts: this pins their shape. A change
// here that is not an added field needs a new outputAPIVersion.
func TestOutputDocumentsKeepTheirShape(t *testing.T) {
	cfg := rollout.NewConfig("etcd", "db", "etcd")
	st := outputState()
	p, err := rollout.PlanRollout(st, rollout.LeaderLazy)
	require.NoError(t, err)
	member1 := `{"name":"etcd-1","ordinal":1,"revision":"etcd-old","updated":false,"ready":true,"etcd":"healthy","version":"3.6.8","storageVersion":"3.6.0","leader":true,"learner":false,"raftTerm":4,"raftIndex":120,"appliedIndex":120}`
	// A plan adds how long each member's data lives and how a roll takes it.
	member1Plan := member1[:len(member1)-1] + `,"data":"Unknown","procedure":"restart"}`
	tests := []struct {
		name string
		doc  any
		want string
	}{
		{"status", func() any {
			d := statusDoc{docHead: newDocHead("Status", cfg, st), Lease: newLeaseDoc("etcd", "pulumi-etcd-rollout@host/42", 9600*time.Millisecond)}
			d.Members = d.Members[1:2]
			return d
		}(),
			`{"apiVersion":"etcd-rollout/v1","kind":"Status",` +
				`"statefulSet":{"namespace":"db","name":"etcd","replicas":3,"partition":3,"locked":true,"updateRevision":"etcd-new","currentRevision":"etcd-old","clusterVersion":"3.6.0","votingMembers":3,"learners":0},` +
				`"members":[` + member1 + `],` +
				`"lease":{"name":"etcd-etcd-rollout","state":"held","holder":"pulumi-etcd-rollout@host/42","validForSeconds":10}}`},
		{"plan", func() any { d := newPlanDoc(cfg, st, p, nil); d.Members = d.Members[1:2]; return d }(),
			`{"apiVersion":"etcd-rollout/v1","kind":"Plan",` +
				`"statefulSet":{"namespace":"db","name":"etcd","replicas":3,"partition":3,"locked":true,"updateRevision":"etcd-new","currentRevision":"etcd-old","clusterVersion":"3.6.0","votingMembers":3,"learners":0},` +
				`"members":[` + member1Plan + `],` +
				`"summary":"` + p.String() + `","roll":["etcd-2","etcd-1","etcd-0"],` +
				`"steps":[{"kind":"lower-partition","member":"etcd-2"},{"kind":"wait-member","member":"etcd-2"},{"kind":"cooldown"},` +
				`{"kind":"transfer-leader","from":"etcd-1","to":"etcd-2"},{"kind":"lower-partition","member":"etcd-1"},{"kind":"wait-member","member":"etcd-1"},{"kind":"cooldown"},` +
				`{"kind":"lower-partition","member":"etcd-0"},{"kind":"wait-member","member":"etcd-0"},{"kind":"relock"}],"leaderTransfers":1}`},
		{"a blocked plan", func() any {
			d := newPlanDoc(cfg, st, rollout.Plan{}, errors.New("rollout blocked: restarting etcd-2 would leave 1 healthy member(s)"))
			d.Members = nil
			return d
		}(),
			`{"apiVersion":"etcd-rollout/v1","kind":"Plan",` +
				`"statefulSet":{"namespace":"db","name":"etcd","replicas":3,"partition":3,"locked":true,"updateRevision":"etcd-new","currentRevision":"etcd-old","clusterVersion":"3.6.0","votingMembers":3,"learners":0},` +
				`"members":null,"summary":"` + rollout.Plan{}.String() + `","roll":[],"steps":[],"leaderTransfers":0,"blocked":"rollout blocked: restarting etcd-2 would leave 1 healthy member(s)"}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var out bytes.Buffer
			require.NoError(t, writeDoc(&out, outputJSON, tt.doc))
			assert.JSONEq(t, tt.want, out.String())
			var y bytes.Buffer
			require.NoError(t, writeDoc(&y, outputYAML, tt.doc))
			assert.Contains(t, y.String(), "apiVersion: etcd-rollout/v1\n")
		})
	}
}

// The summary after a run says what the TLS trust checks cost, and says nothing of them where none ran.
func TestPrintSummaryTellsTheTrustChecks(t *testing.T) {
	tests := []struct {
		name string
		cost rollout.TrustCheckCost
		want string
	}{
		{"an mTLS run", rollout.TrustCheckCost{Checks: 7, Probes: 24, APIRequests: 9, Duration: 312400 * time.Microsecond},
			"  TLS trust checks:     7 (24 member ports probed, 312ms, 9 API requests)\n"},
		{"no TLS", rollout.TrustCheckCost{}, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cmd := newRootCommand()
			var out bytes.Buffer
			cmd.SetOut(&out)
			printSummary(cmd, rollout.Result{MembersRolled: []string{"etcd-2"}, TrustChecks: tt.cost}, nil)
			if tt.want == "" {
				assert.NotContains(t, out.String(), "TLS trust checks")
				return
			}
			assert.Contains(t, out.String(), tt.want)
		})
	}
}
