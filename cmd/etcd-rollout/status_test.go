package main

import (
	"bytes"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/etcd-rollout/pulumi-etcd-rollout/rollout"
)

func TestPrintRolloutStatus(t *testing.T) {
	at := time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)
	cfg := rollout.NewConfig("etcd", "db", "etcd-headless")
	tests := []struct {
		name   string
		st     rollout.RolloutStatus
		found  bool
		want   []string
		absent []string
	}{
		{
			name: "none published", found: false,
			want: []string{"Rollout status (configmap etcd-etcd-rollout-status): none published yet"},
		},
		{
			name: "mid-rollout", found: true,
			st: rollout.RolloutStatus{TargetRevision: "etcd-7f", MembersDone: 1, Members: 3, PendingMembers: []string{"etcd-1", "etcd-0"},
				Step: "wait-member etcd-1", Message: "etcd-1 recreated", Run: "host/1/ab", UpdatedAt: at,
				Conditions: []metav1.Condition{
					{Type: "Progressing", Status: "True", Reason: "RolloutProgressing", Message: "rolling db/etcd", LastTransitionTime: metav1.NewTime(at)},
					{Type: "MembersUpdated", Status: "False", Reason: "MembersRolling", Message: "1 of 3 members", LastTransitionTime: metav1.NewTime(at)},
					{Type: "Failed", Status: "False", Reason: "RolloutProgressing", Message: "line one\nline two", LastTransitionTime: metav1.NewTime(at)},
				}},
			want: []string{"updated 2026-12-01T10:00:00Z by host/1/ab", "target revision etcd-7f; members done 1 of 3 (pending: etcd-1, etcd-0); step wait-member etcd-1",
				"last progress: etcd-1 recreated", "CONDITION", "Progressing     True    RolloutProgressing  2026-12-01T10:00:00Z  rolling db/etcd",
				"MembersUpdated  False", "line one line two"},
		},
		{
			name: "members not known yet", found: true, st: rollout.RolloutStatus{MembersDone: -1, Members: -1},
			want: []string{"target revision -; members done -; step -"}, absent: []string{"pending", "last progress"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var out bytes.Buffer
			printRolloutStatus(&out, cfg, tt.st, tt.found)
			for _, w := range tt.want {
				assert.Contains(t, out.String(), w)
			}
			for _, a := range tt.absent {
				assert.NotContains(t, out.String(), a)
			}
		})
	}
}
