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

// The trust a member's process started with, in words: each CA it announces, matched by name with the
// template's trust file, both fingerprints when two CAs share the name, none when the file lost it.
func TestDescribeListenerTrust(t *testing.T) {
	after := time.Date(2027, 1, 2, 0, 0, 0, 0, time.UTC)
	for _, tc := range []struct {
		name string
		lt   rollout.ListenerTrust
		want string
	}{
		{"matched", rollout.ListenerTrust{AsksClientCert: true, TrustFile: "/tls/ca.crt", ServedIssuer: "CN=peer-ca", ServedNotAfter: after,
			CAs: []rollout.AnnouncedCA{{Subject: "CN=peer-ca", SHA256: []string{"0123456789abcdef0123"}}}},
			"trusts CN=peer-ca (CA of this name in /tls/ca.crt: sha256 0123456789abcdef); serves a certificate of CN=peer-ca until 2027-01-02"},
		{"two of one name", rollout.ListenerTrust{AsksClientCert: true, TrustFile: "/tls/ca.crt", ServedIssuer: "CN=peer-ca", ServedNotAfter: after,
			CAs: []rollout.AnnouncedCA{{Subject: "CN=peer-ca", SHA256: []string{"aaaaaaaaaaaaaaaaff", "bbbbbbbbbbbbbbbbff"}}}},
			"trusts CN=peer-ca (CA of this name in /tls/ca.crt: sha256 aaaaaaaaaaaaaaaa or bbbbbbbbbbbbbbbb); serves a certificate of CN=peer-ca until 2027-01-02"},
		{"gone from the file", rollout.ListenerTrust{AsksClientCert: true, TrustFile: "/tls/ca.crt", ServedIssuer: "CN=old", ServedNotAfter: after,
			CAs: []rollout.AnnouncedCA{{Subject: "CN=old"}}},
			"trusts CN=old (no CA of this name in /tls/ca.crt now); serves a certificate of CN=old until 2027-01-02"},
		{"no client certificates", rollout.ListenerTrust{ServedIssuer: "CN=ca", ServedNotAfter: after},
			"asks no client certificate; serves a certificate of CN=ca until 2027-01-02"},
		{"down", rollout.ListenerTrust{Err: "seeing etcd-0's trust on port 2380: connection refused"},
			"not seen: seeing etcd-0's trust on port 2380: connection refused"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			assert.Equal(t, tc.want, describeListenerTrust(&tc.lt))
		})
	}
}
