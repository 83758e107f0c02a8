//go:build e2e && faults

package e2e

import (
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/etcd-rollout/pulumi-etcd-rollout/tests/harness"
)

// revertTimeouts keep a failing member's gates short: the pod-ready gate has 60 s, the etcd gate 15 s.
const (
	revertReadyTimeout  = 60
	revertHealthTimeout = 15
)

// A template whose member does not run (it crash-loops, or it is Ready but etcd never answers) fails the
// `pulumi up` within readyTimeoutSeconds + 60 s, naming the member and the revert; afterwards every member is
// healthy on the old revision, the partition is locked, no election happened and the background client's
// history is linearizable. The preview that follows warns about the failed attempt.
func TestFaultsBadRevisionIsReverted(t *testing.T) {
	p := repoPaths(t)
	c := harness.Connect(t)
	cases := []struct {
		name   string
		fault  string // pod-template annotations of the bad template (the local cluster's start faults)
		wantIn string // what the failure names of the member's last state
	}{
		{name: "crash loop", fault: `{"etcd-rollout.test/crash-after": "2"}`, wantIn: "failed the etcd health gate"},
		{name: "Ready but never healthy in etcd", fault: `{"etcd-rollout.test/serve-delay": "600"}`, wantIn: "failed the etcd health gate"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			ctx := t.Context()
			ns := c.Namespace(t)
			r, config := nodeExample("ts-dropin", false)(t, p, c, ns)
			cfg := func(rev string) map[string]string {
				m := config(rev)
				m["readyTimeoutSeconds"], m["healthTimeoutSeconds"] = fmt.Sprint(revertReadyTimeout), fmt.Sprint(revertHealthTimeout)
				return m
			}
			res, err := r.up(ctx, cfg("1"))
			require.NoError(t, err, "first up:\n%s", res.explained())
			good := viewStatefulSet(ctx, t, c, ns).UpdateRevision
			e, stopHistory := startHistory(ctx, t, c, ns)
			termBefore := e.Must(t).Term()
			_, uidsBefore := e.Must(t).Pods()

			bad := cfg("2")
			bad["podAnnotations"] = tc.fault
			start := time.Now()
			res, err = r.up(ctx, bad)
			took := time.Since(start)
			require.Error(t, err, "the up of a template that does not run must fail:\n%s", res.explained())
			t.Logf("the failing up took %s:\n%s", took.Round(time.Second), tail(res.Text, 40))
			badRev := viewStatefulSet(ctx, t, c, ns).UpdateRevision
			assert.Less(t, took, time.Duration(revertReadyTimeout+60)*time.Second, "fails within readyTimeoutSeconds + 60 s")
			assert.Contains(t, res.Text, fmt.Sprintf("reverted etcd-2 to %s: revision %s %s", good, badRev, tc.wantIn))
			// The error's first line says what happened before the run's whole account.
			assert.Contains(t, res.Text, fmt.Sprintf("etcd-2 failed the etcd health gate on revision %s (last seen: ", badRev))
			assert.Contains(t, res.Text, fmt.Sprintf(") and was reverted to %s; the partition is locked, so no other member restarts: fix the pod template", good))

			require.NoError(t, e.WaitHealthy(ctx), "every member healthy after the revert")
			v := viewStatefulSet(ctx, t, c, ns)
			assert.Equal(t, v.Replicas, v.Partition, "the partition is locked")
			assert.Equal(t, []string{good, good, good}, v.PodRevisions, "etcd-2 back on the old revision")
			_, uidsAfter := e.Must(t).Pods()
			assert.Equal(t, uidsBefore[:2], uidsAfter[:2], "etcd-0 and etcd-1 were never restarted")
			assert.Zero(t, unplannedElections(ctx, t, c, ns, termBefore, e.Must(t).Term()), "no real election")
			stopHistory()

			pv, err := r.preview(ctx, bad)
			require.NoError(t, err, "the preview after the revert:\n%s", pv.explained())
			assert.Contains(t, pv.Text, fmt.Sprintf("last attempt of revision %s failed on etcd-2", badRev))
			assert.Contains(t, pv.Text, "it was reverted to "+good)
			require.NoError(t, r.destroy(ctx))
		})
	}
}

// A member left down on a broken revision (an up with onFailure: stop) does not block the fix: the next up
// with a working template rolls that member first, deleting its pod (OrderedReady never replaces a pod
// that is not Ready), then the others, with no quorum loss and no election.
func TestFaultsStuckMemberIsFixedForward(t *testing.T) {
	p := repoPaths(t)
	c := harness.Connect(t)
	ctx := t.Context()
	ns := c.Namespace(t)
	r, config := nodeExample("ts-managed", false)(t, p, c, ns)
	cfg := func(rev string) map[string]string {
		m := config(rev)
		m["readyTimeoutSeconds"], m["healthTimeoutSeconds"], m["onFailure"] = "30", fmt.Sprint(revertHealthTimeout), "stop"
		return m
	}
	res, err := r.up(ctx, cfg("1"))
	require.NoError(t, err, "first up:\n%s", res.explained())
	e, stopHistory := startHistory(ctx, t, c, ns)
	termBefore := e.Must(t).Term()

	broken := cfg("2")
	broken["podAnnotations"] = `{"etcd-rollout.test/broken": "true"}`
	res, err = r.up(ctx, broken)
	require.Error(t, err, "the broken template fails:\n%s", res.explained())
	stuck := viewStatefulSet(ctx, t, c, ns)
	require.Equal(t, stuck.UpdateRevision, stuck.PodRevisions[2], "onFailure stop leaves etcd-2 on the broken revision")
	assert.Equal(t, stuck.Replicas, stuck.Partition)
	assert.NotContains(t, res.Text, "reverted etcd-2")
	_, err = e.Status(ctx, 2)
	require.Error(t, err, "etcd-2 is down on the broken revision")

	fixed := cfg("3")
	fixed["podAnnotations"] = "{}" // stack config persists between ups: the broken annotation must be taken out
	start := time.Now()
	res, err = r.up(ctx, fixed)
	require.NoError(t, err, "the fixed template rolls, the stuck member first:\n%s", res.explained())
	t.Logf("fix-forward up took %s", time.Since(start).Round(time.Second))
	requireRolledAndLocked(t, viewStatefulSet(ctx, t, c, ns))
	require.NoError(t, e.WaitHealthy(ctx))
	rolledPods, _ := res.Outputs["membersRolled"].([]any)
	require.NotEmpty(t, rolledPods)
	assert.Equal(t, "etcd-2", rolledPods[0], "the member that was down goes first")
	assert.Contains(t, res.Text, "etcd-2 is already down: deleting its pod")
	assert.Zero(t, unplannedElections(ctx, t, c, ns, termBefore, e.Must(t).Term()), "no real election")
	stopHistory()
	require.NoError(t, r.destroy(ctx))
}
