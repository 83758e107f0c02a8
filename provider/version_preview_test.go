package provider

import (
	"errors"
	"testing"

	p "github.com/pulumi/pulumi-go-provider"
	"github.com/pulumi/pulumi/sdk/v3/go/property"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"

	"github.com/etcd-rollout/pulumi-etcd-rollout/rollout"
)

// Check refuses a template flag the template's etcd version does not accept, naming the flag and the version.
func TestPreflightRefusesFlagsTheTargetDoesNotAccept(t *testing.T) {
	in := RolloutArgs{StsName: "etcd", Namespace: "db", ServiceName: "etcd", VersionHash: "v1"}
	withContainer := func(image string, args []string, env ...corev1.EnvVar) clusterFacts {
		return clusterFacts{StatefulSet: etcdSts(func(s *appsv1.StatefulSet) {
			c := &s.Spec.Template.Spec.Containers[0]
			c.Image, c.Args, c.Env = image, append(c.Args, args...), env
		})}
	}
	for _, tc := range []struct {
		name  string
		facts clusterFacts
		want  []string // pieces of the one stsName failure; none: no failure
	}{
		{name: "3.5 with --feature-gates and --log-format",
			facts: withContainer("registry.k8s.io/etcd:3.5.35-0", []string{"--feature-gates=InitialCorruptCheck=true", "--log-format", "json"}),
			want:  []string{"StatefulSet db/etcd, container etcd: etcd 3.5 does not accept --feature-gates, --log-format"}},
		{name: "3.5 with a 3.6 name of a renamed flag",
			facts: withContainer("registry.k8s.io/etcd:3.5.35-0", []string{"--compaction-batch-limit=1000"}),
			want:  []string{"--compaction-batch-limit (3.5 calls it --experimental-compaction-batch-limit)"}},
		{name: "3.6 with --enable-v2 from the environment",
			facts: withContainer("registry.k8s.io/etcd:3.6.8-0", nil, corev1.EnvVar{Name: "ETCD_ENABLE_V2", Value: "true"}),
			want:  []string{"etcd 3.6 does not accept ETCD_ENABLE_V2 (etcd would start without it)"}},
		{name: "3.6 with its own flags", facts: withContainer("registry.k8s.io/etcd:3.6.8-0", []string{"--feature-gates=InitialCorruptCheck=true", "--log-format=json"})},
		{name: "an untagged image is left to the engine", facts: withContainer("registry.k8s.io/etcd@sha256:0123", []string{"--no-such-flag"})},
	} {
		t.Run(tc.name, func(t *testing.T) {
			failures := preflightFailures(in, tc.facts, true)
			if len(tc.want) == 0 {
				assert.Empty(t, failures)
				return
			}
			require.Len(t, failures, 1, "%v", failures)
			assert.Equal(t, "stsName", failures[0].Property)
			for _, w := range tc.want {
				assert.Contains(t, failures[0].Reason, w)
			}
		})
	}
}

// The preview's plan list starts with the version path when the roll changes etcd's version.
func TestPlanLinesStartWithTheVersionPath(t *testing.T) {
	plan := func(template, member, memberVersion, cluster string) rollout.Plan {
		s := rollout.ClusterState{Replicas: 3, Partition: 3, UpdateRevision: "new", CurrentRevision: "old", VotingMembers: 3,
			TemplateImage: template, ClusterVersion: cluster}
		for i := 0; i < 3; i++ {
			s.Members = append(s.Members, rollout.MemberState{Ordinal: i, Pod: "etcd-" + string(rune('0'+i)), PodExists: true, Revision: "old",
				Ready: true, Reachable: true, Healthy: true, MemberID: uint64(100 + i), IsLeader: i == 0, RaftTerm: 2,
				Image: member, ServerVersion: memberVersion})
		}
		p, err := rollout.PlanRollout(s, rollout.LeaderLazy)
		require.NoError(t, err)
		return p
	}
	for _, tc := range []struct {
		name string
		plan rollout.Plan
		want []string
	}{
		{name: "a minor upgrade", plan: plan("registry.k8s.io/etcd:3.6.8-0", "registry.k8s.io/etcd:3.5.35-0", "3.5.35", "3.5.0"),
			want: []string{"etcd 3.5.35 → 3.6.8 (cluster version 3.5 → 3.6 once etcd-0 is rolled)",
				"a verified snapshot of the leader before etcd-2 restarts",
				"roll etcd-2", "roll etcd-1", "move leader etcd-0 -> etcd-2", "roll etcd-0", "re-lock partition at 3"}},
		{name: "a patch change", plan: plan("registry.k8s.io/etcd:3.6.8-0", "registry.k8s.io/etcd:3.6.7-0", "3.6.7", "3.6.0"),
			want: []string{"etcd 3.6.7 → 3.6.8 (cluster version stays 3.6)",
				"roll etcd-2", "roll etcd-1", "move leader etcd-0 -> etcd-2", "roll etcd-0", "re-lock partition at 3"}},
		{name: "no version change", plan: plan("registry.k8s.io/etcd:3.6.8-0", "registry.k8s.io/etcd:3.6.8-0", "3.6.8", "3.6.0"),
			want: []string{"roll etcd-2", "roll etcd-1", "move leader etcd-0 -> etcd-2", "roll etcd-0", "re-lock partition at 3"}},
		{name: "members whose data dies with their pod", plan: rollout.Plan{Pods: []string{"etcd-0", "etcd-1", "etcd-2"},
			Steps: []rollout.Step{{Kind: rollout.StepReplace, Ordinal: 2}, {Kind: rollout.StepWaitMember, Ordinal: 2}}, Roll: []int{2}},
			want: []string{"replace etcd-2: its data dies with its pod, so it is removed, added back as a learner and promoted, never restarted under its old member ID (while one is out the other 2 voters tolerate no failure)"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			assert.Equal(t, tc.want, planLines(tc.plan))
		})
	}
}

// Check asks etcd `downgrade validate` for a plan that lowers the minor version: the preview says etcd agreed,
// and a refusal is a Check failure that names etcd's answer, before anything is touched.
func TestCheckValidatesADowngradeWithEtcd(t *testing.T) {
	downgrade := func() rollout.ClusterState {
		s := healthyState("rev-a", 0)
		s.UpdateRevision, s.TemplateImage, s.ClusterVersion = "rev-b", "registry.k8s.io/etcd:3.5.35-0", "3.6.0"
		for i := range s.Members {
			s.Members[i].Image, s.Members[i].ServerVersion, s.Members[i].StorageVersion = "registry.k8s.io/etcd:3.6.8-0", "3.6.8", "3.6.0"
		}
		return s
	}
	for _, tc := range []struct {
		name        string
		validateErr error
		wantPlan    []string
		wantFailure string
	}{
		{name: "etcd agrees", wantPlan: []string{
			"etcd 3.6.8 → 3.5.35 (downgrade to 3.5: validate ok; enable before etcd-2; cluster version 3.6 → 3.5)",
			"a verified snapshot of the leader before etcd-2 restarts, to /var/lib/pulumi-state/etcd-rollout/snapshots",
			"enable etcd's downgrade to 3.5, then wait for cluster version 3.5",
			"roll etcd-2", "roll etcd-1", "move leader etcd-0 -> etcd-2", "roll etcd-0", "re-lock partition at 3"}},
		{name: "etcd refuses", validateErr: errors.New("etcd refused `downgrade validate 3.5` (asked through etcd-0): etcdserver: invalid downgrade target version"),
			wantFailure: "StatefulSet db/etcd: etcd refused `downgrade validate 3.5`"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Setenv("XDG_STATE_HOME", "/var/lib/pulumi-state") // the snapshot's default destination follows it
			f := &fakeCluster{uid: "uid-1", state: downgrade(), validateErr: tc.validateErr}
			resp, err := server(t, f.deps()).Check(p.CheckRequest{Urn: rolloutURN, State: inputs(nil), Inputs: inputs(nil)})
			require.NoError(t, err)
			assert.Equal(t, []string{"3.5"}, f.validated)
			if tc.wantFailure != "" {
				require.Len(t, resp.Failures, 1)
				assert.Contains(t, resp.Failures[0].Reason, tc.wantFailure)
				return
			}
			require.Empty(t, resp.Failures)
			assert.Equal(t, tc.wantPlan, planOf(resp.Inputs))
		})
	}
}

// A preview that plans a roll warns about the etcd container's probes that turn the roll's hiccup into an
// outage, naming the probe and what to use instead; the plan is unchanged (the roll goes on).
func TestPreviewWarnsAboutProbesThatNeedQuorum(t *testing.T) {
	logs := recordLogs(t)
	s := healthyState("rev-a", 0)
	s.UpdateRevision = "rev-b"
	s.ProbeWarnings = []rollout.ProbeFinding{{Kind: "LivenessNeedsQuorum", Probe: "livenessProbe", Check: "httpGet /health",
		Why: "it fails on every member while the cluster has no quorum", Instead: "httpGet /livez"}}
	f := &fakeCluster{uid: "uid-1", state: s}
	resp, err := server(t, f.deps()).Check(p.CheckRequest{Urn: rolloutURN, State: inputs(nil), Inputs: inputs(nil)})
	require.NoError(t, err)
	require.Empty(t, resp.Failures)
	assert.NotEmpty(t, planOf(resp.Inputs), "the roll is planned as usual")
	assert.True(t, containsAny(logs.messages(), "db/etcd: livenessProbe httpGet /health: it fails on every member while the cluster has no quorum; use httpGet /livez instead"),
		"warned: %q", logs.messages())
}

// A one-member etcd's template change is refused by the preview unless acceptWriteOutage is set, on that
// input (waiting changes nothing; consent does); with it the plan says the only member's reads and writes
// stop and a snapshot comes first. With nothing to roll it is not refused.
func TestPreviewOfAOneMemberRollAsksForConsent(t *testing.T) {
	oneMember := func(update string) rollout.ClusterState {
		s := healthyState("rev-a", 0)
		s.Replicas, s.Partition, s.VotingMembers, s.Members = 1, 1, 1, s.Members[:1]
		s.UpdateRevision = update
		return s
	}
	for _, tc := range []struct {
		name     string
		state    rollout.ClusterState
		accept   bool
		failure  string
		wantPlan []string
	}{
		{name: "refused without consent", state: oneMember("rev-b"), failure: "to restart it anyway, accept the write outage (acceptWriteOutage"},
		{name: "planned with it", state: oneMember("rev-b"), accept: true, wantPlan: []string{
			"a verified snapshot of the leader before etcd-0 restarts, to " + rollout.DefaultSnapshotDir(),
			"roll etcd-0: the only member, so every read and write stops until it is back (acceptWriteOutage); the outage is measured",
			"re-lock partition at 1"}},
		{name: "nothing to roll: not refused", state: oneMember("rev-a")},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := &fakeCluster{uid: "uid-1", state: tc.state}
			in := map[string]property.Value{}
			if tc.accept {
				in["acceptWriteOutage"] = property.New(true)
			}
			resp, err := server(t, f.deps()).Check(p.CheckRequest{Urn: rolloutURN, State: inputs(nil), Inputs: inputs(in)})
			require.NoError(t, err)
			if tc.failure != "" {
				require.Len(t, resp.Failures, 1, "%v", resp.Failures)
				assert.Equal(t, "acceptWriteOutage", resp.Failures[0].Property)
				assert.Contains(t, resp.Failures[0].Reason, tc.failure)
				return
			}
			require.Empty(t, resp.Failures)
			assert.Equal(t, tc.wantPlan, planOf(resp.Inputs))
		})
	}
}
