package main

import (
	"bytes"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/etcd-rollout/pulumi-etcd-rollout/rollout"
)

// `etcd-rollout status` shows each member's version by its own word (its image tag, marked, when it does not
// answer), its storage version where etcd reports one, and the cluster version.
func TestPrintStatusShowsVersions(t *testing.T) {
	cfg := rollout.NewConfig("etcd", "db", "etcd-headless")
	st := rollout.ClusterState{Replicas: 3, Partition: 3, UpdateRevision: "etcd-new", CurrentRevision: "etcd-old", VotingMembers: 3,
		ClusterVersion: "3.5.0", Members: []rollout.MemberState{
			{Pod: "etcd-0", Revision: "etcd-old", Ready: true, Reachable: true, Healthy: true, ServerVersion: "3.5.35", Image: "registry.k8s.io/etcd:3.5.35-0"},
			{Pod: "etcd-1", Revision: "etcd-new", Ready: true, Reachable: true, Healthy: true, ServerVersion: "3.6.8", StorageVersion: "3.5.0", Image: "registry.k8s.io/etcd:3.6.8-0"},
			{Pod: "etcd-2", Revision: "etcd-new", Image: "registry.k8s.io/etcd:3.6.8-0", Problem: "connection refused"},
		}}
	var out bytes.Buffer
	printStatus(&out, cfg, st)
	lines := strings.Split(out.String(), "\n")
	require.GreaterOrEqual(t, len(lines), 7, out.String())
	assert.Contains(t, lines[1], "cluster version 3.5.0")
	for _, tc := range []struct{ line, want []string }{
		{line: strings.Fields(lines[3]), want: []string{"MEMBER", "REVISION", "UPDATED", "READY", "ETCD", "VERSION", "STORAGE"}},
		{line: strings.Fields(lines[4]), want: []string{"etcd-0", "etcd-old", "no", "yes", "healthy", "3.5.35", "-"}},
		{line: strings.Fields(lines[5]), want: []string{"etcd-1", "etcd-new", "yes", "yes", "healthy", "3.6.8", "3.5.0"}},
		{line: strings.Fields(lines[6]), want: []string{"etcd-2", "etcd-new", "yes", "no", "down", "3.6.8", "(tag)"}},
	} {
		require.GreaterOrEqual(t, len(tc.line), len(tc.want), "%v", tc.line)
		assert.Equal(t, tc.want, tc.line[:len(tc.want)])
	}
}
