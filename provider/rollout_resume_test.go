package provider

import (
	"context"
	"errors"
	"testing"
	"time"

	p "github.com/pulumi/pulumi-go-provider"
	"github.com/pulumi/pulumi-go-provider/integration"
	"github.com/pulumi/pulumi/sdk/v3/go/property"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"

	"github.com/etcd-rollout/pulumi-etcd-rollout/rollout"
)

// deadRun is the Lease holder of a `pulumi up` that was SIGKILLed: nobody renews it any more.
const deadRun = "pulumi-etcd-rollout db/etcd @ci-runner-7/4242/1a2b3c4d"

// deadRunLease is the Lease as the dead run left it.
var deadRunLease = leaseFacts{Name: "db/etcd-etcd-rollout", Holder: deadRun, Duration: 15 * time.Second}

// takeoverOfDeadRun is the preview line for a partition the dead run left at 0.
const takeoverOfDeadRun = `take over lease db/etcd-etcd-rollout from "` + deadRun + `" once it has gone unrenewed for 15s (its run stopped with the partition at 0)`

// stoppedState is the Rollout's state after a `pulumi up` of versionHash v1 was stopped by its customTimeouts
// after etcd-2 (complete: false, what was left in plan), which a second `pulumi up` then resumed and was
// killed in: a killed run writes no state, so this is still what the next up finds.
func stoppedState() property.Map {
	return state(map[string]property.Value{
		"complete":       property.New(false),
		"finishedAt":     property.New(""),
		"updateRevision": property.New("rev-b"),
		"membersRolled":  property.New([]property.Value{property.New("etcd-2")}),
		"plan": property.New([]property.Value{property.New("roll etcd-1"), property.New("move leader etcd-0 -> etcd-2"),
			property.New("roll etcd-0"), property.New("re-lock partition at 3")}),
	})
}

// upResult is what one simulated `pulumi up` did to the Rollout.
type upResult struct {
	plan    []string
	diff    map[string]p.PropertyDiff
	changes bool
	updated bool
	state   property.Map
}

// nextUp makes the calls `pulumi up` makes for an existing Rollout whose program did not change: Check with
// the last inputs, Diff of the checked inputs against the state, and Update only when Diff reports changes.
func nextUp(t *testing.T, s integration.Server, st property.Map) upResult {
	t.Helper()
	checked, err := s.Check(p.CheckRequest{Urn: rolloutURN, State: inputs(nil), Inputs: inputs(nil)})
	require.NoError(t, err)
	require.Empty(t, checked.Failures)
	diff, err := s.Diff(p.DiffRequest{Urn: rolloutURN, ID: "db/etcd", State: st, Inputs: checked.Inputs, OldInputs: inputs(nil)})
	require.NoError(t, err)
	res := upResult{plan: planOf(checked.Inputs), diff: diff.DetailedDiff, changes: diff.HasChanges, state: st}
	if !diff.HasChanges {
		return res
	}
	updated, err := s.Update(p.UpdateRequest{Urn: rolloutURN, ID: "db/etcd", State: st, Inputs: checked.Inputs, OldInputs: inputs(nil)})
	require.NoError(t, err)
	res.updated, res.state = true, updated.Properties
	return res
}

// issue 21, item 5: a `pulumi up` killed with the partition lowered after every member was updated (the
// controller recreated the last one on its own) leaves a plan that only locks, a Lease nobody renews, and a
// state whose last run did not complete. The next `pulumi up` must run the engine (which takes the lease over
// and re-locks) and end complete; the up after that has nothing to do.
func TestNextUpFinishesWhatAKilledRunLeft(t *testing.T) {
	tests := []struct {
		name            string
		partition       int
		lease           *leaseFacts
		leaseUnreadable bool
		state           property.Map
		wantPlan        []string
		wantDiff        []string
	}{
		{name: "killed at partition 0 with every member updated: the dead run's lease is taken over and the partition locked",
			partition: 0, lease: &deadRunLease, state: stoppedState(),
			wantPlan: []string{takeoverOfDeadRun, "lock partition at 3"}, wantDiff: []string{"plan", "complete"}},
		{name: "the same when the preview may not read Leases",
			partition: 0, lease: &deadRunLease, leaseUnreadable: true, state: stoppedState(),
			wantPlan: []string{"lock partition at 3"}, wantDiff: []string{"plan", "complete"}},
		{name: "killed after its own re-lock: only the lease and the incomplete state are left",
			partition: 3, lease: &deadRunLease, state: stoppedState(),
			wantPlan: nil, wantDiff: []string{"complete"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			logs := recordLogs(t)
			lease := tt.lease
			f := &fakeCluster{uid: "uid-1", state: lowered(healthyState("rev-b", 0), tt.partition),
				result: rollout.Result{UpdateRevision: "rev-b", StartedAt: time.Now(), FinishedAt: time.Now().Add(16 * time.Second)}}
			if tt.partition < 3 {
				f.runEvents = []rollout.Event{
					{Message: "took over the stale lease of " + deadRun},
					{Step: rollout.Step{Kind: rollout.StepLock, Ordinal: 3}, Message: "partition left at 0 by " + deadRun + "; re-locking it before anything else"},
				}
			}
			f.afterRun = func(f *fakeCluster) { f.state.Partition, lease = f.state.Replicas, nil } // re-locked, lease released
			s := server(t, depsWithLease(f, &lease, tt.leaseUnreadable))

			up := nextUp(t, s, tt.state)
			assert.Equal(t, tt.wantPlan, up.plan, "the preview says what the run will do")
			assert.ElementsMatch(t, tt.wantDiff, keys(up.diff))
			require.True(t, up.updated, "the next up runs the rollout")
			assert.Equal(t, 1, f.runs)
			assert.Equal(t, 3, f.state.Partition, "the partition is locked")
			assert.True(t, up.state.Get("complete").AsBool(), "the state says complete")
			assert.Empty(t, planOf(up.state), "nothing is left")
			assert.NotEmpty(t, up.state.Get("finishedAt").AsString())
			if tt.partition < 3 {
				assert.True(t, containsAny(logs.messages(), "db/etcd: partition left at 0 by "+deadRun+"; re-locking it before anything else"),
					"the re-lock of a dead run's partition is in the diagnostics, not only a status line: %q", logs.messages())
			}

			again := nextUp(t, s, up.state)
			assert.False(t, again.changes, "the up after it has nothing to do: %v, plan %q", again.diff, again.plan)
			assert.Equal(t, 1, f.runs)
		})
	}
}

// depsWithLease serves the StatefulSet with the fake's partition and the Lease *lease points at (nil: free).
func depsWithLease(f *fakeCluster, lease **leaseFacts, leaseUnreadable bool) Deps {
	deps := f.deps()
	deps.ReadFacts = func(context.Context, *rest.Config, string, string) (clusterFacts, error) {
		f.mu.Lock()
		defer f.mu.Unlock()
		sts := etcdSts(func(s *appsv1.StatefulSet) {
			s.Spec.UpdateStrategy.RollingUpdate.Partition = ptr.To(int32(f.state.Partition))
			s.UID = types.UID(f.uid)
		})
		facts := clusterFacts{StatefulSet: sts}
		switch {
		case *lease == nil:
		case leaseUnreadable:
			facts.LeaseHeld = true // a Forbidden read: unknown, so a lowered partition is left to the engine
		default:
			facts.LeaseHeld, facts.Lease = true, **lease
		}
		return facts, nil
	}
	return deps
}

func keys(m map[string]p.PropertyDiff) []string {
	out := []string{}
	for k := range m {
		out = append(out, k)
	}
	return out
}

// Diff: a state whose last run did not complete is an update even when the preview planned nothing (it
// could not read the cluster, or only the dead run's lease is left), and says so once.
func TestDiffOfAnIncompleteState(t *testing.T) {
	lockOnly := property.New([]property.Value{property.New("lock partition at 3")})
	tests := []struct {
		name        string
		state       property.Map
		news        property.Map
		want        []string
		wantWarning bool
	}{
		{name: "incomplete, nothing planned", state: stoppedState(), news: inputs(nil), want: []string{"complete"}, wantWarning: true},
		{name: "incomplete, a lock-only plan", state: stoppedState(), news: inputs(map[string]property.Value{"plan": lockOnly}),
			want: []string{"plan", "complete"}},
		{name: "complete, a lock-only plan", state: state(nil), news: inputs(map[string]property.Value{"plan": lockOnly}), want: []string{"plan"}},
		{name: "complete, nothing planned", state: state(nil), news: inputs(nil), want: []string{}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			logs := recordLogs(t)
			f := &fakeCluster{uid: "uid-1"}
			resp, err := server(t, f.deps()).Diff(p.DiffRequest{Urn: rolloutURN, ID: "db/etcd", State: tt.state, Inputs: tt.news})
			require.NoError(t, err)
			assert.ElementsMatch(t, tt.want, keys(resp.DetailedDiff))
			assert.Equal(t, len(tt.want) > 0, resp.HasChanges)
			if d, ok := resp.DetailedDiff["complete"]; ok {
				assert.Equal(t, p.Update, d.Kind)
				assert.True(t, d.InputDiff, "compared as inputs (none carries it), so the CLI prints no '- complete: false'")
			}
			assert.Equal(t, tt.wantWarning, containsAny(logs.messages(), "did not complete (it was stopped or killed): this update runs it again"),
				"%q", logs.messages())
		})
	}
}

// `pulumi refresh` of the state a killed run left says what the next up does, the takeover first.
func TestRefreshOfAPartitionAKilledRunLeft(t *testing.T) {
	logs := recordLogs(t)
	lease := &deadRunLease
	f := &fakeCluster{uid: "uid-1", state: lowered(healthyState("rev-b", 0), 0)}
	resp, err := server(t, depsWithLease(f, &lease, false)).Read(p.ReadRequest{Urn: rolloutURN, ID: "db/etcd",
		Properties: stoppedState(), Inputs: inputs(nil)})
	require.NoError(t, err)
	assert.False(t, resp.Properties.Get("complete").AsBool())
	assert.Equal(t, []string{takeoverOfDeadRun, "lock partition at 3"}, planOf(resp.Properties))
	assert.True(t, containsAny(logs.messages(), `partition 0 is below replicas 3 and lease db/etcd-etcd-rollout is held by "`+deadRun+`"`),
		"%q", logs.messages())
	assert.Zero(t, f.runs)
}

// A run that stops with every member updated but the partition still lowered (its re-lock failed) records
// the lock as what is left, not a vague "finish the interrupted rollout".
func TestStoppedRunRecordsALockLeftToDo(t *testing.T) {
	f := &fakeCluster{uid: "uid-1", state: lowered(healthyState("rev-b", 0), 0),
		result: rollout.Result{UpdateRevision: "rev-b", MembersRolled: []string{"etcd-0"}},
		runErr: errors.New("re-locking db/etcd failed, the partition may still be lowered")}
	resp, err := server(t, f.deps()).Update(p.UpdateRequest{Urn: rolloutURN, ID: "db/etcd", State: stoppedState(), Inputs: inputs(nil)})
	require.Error(t, err)
	assert.False(t, resp.Properties.Get("complete").AsBool())
	assert.Equal(t, []string{"lock partition at 3"}, planOf(resp.Properties))
}

// A cluster that is blocked (here: no leader) holds the run before its first step, but not before it has
// taken the dead run's lease over and re-locked: the preview says both, then why it holds.
func TestPreviewOfABlockedClusterAKilledRunLeft(t *testing.T) {
	live := lowered(healthyState("rev-b", -1), 0)
	live.Members[2].Revision = "rev-a"
	lease := &deadRunLease
	f := &fakeCluster{uid: "uid-1", state: live}
	resp, err := server(t, depsWithLease(f, &lease, false)).Check(p.CheckRequest{Urn: rolloutURN, State: inputs(nil), Inputs: inputs(nil)})
	require.NoError(t, err)
	require.Empty(t, resp.Failures)
	plan := planOf(resp.Inputs)
	require.Len(t, plan, 3, "%q", plan)
	assert.Equal(t, []string{takeoverOfDeadRun, "lock partition at 3"}, plan[:2])
	assert.Contains(t, plan[2], "blocked: rollout blocked: the cluster has no leader")
}
