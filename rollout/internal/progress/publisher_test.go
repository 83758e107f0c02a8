package progress

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/utils/ptr"

	"github.com/etcd-rollout/pulumi-etcd-rollout/rollout/internal/lease"
	"github.com/etcd-rollout/pulumi-etcd-rollout/rollout/internal/planner"
	"github.com/etcd-rollout/pulumi-etcd-rollout/rollout/internal/progress/progresstest"
	"github.com/etcd-rollout/pulumi-etcd-rollout/rollout/internal/snapshot"
)

// leaseAcquiredAt makes l held by this process since at, as acquire leaves it.
func leaseAcquiredAt(l *lease.Lease, at time.Time) {
	now := metav1.NewMicroTime(at)
	l.Set(&coordinationv1.Lease{Spec: coordinationv1.LeaseSpec{HolderIdentity: ptr.To(l.Holder), AcquireTime: &now}})
}

// The tests' reader reads the key the publisher writes.
func TestTheTestsReadTheConditionsKey(t *testing.T) {
	assert.Equal(t, StatusKeyConditions, progresstest.ConditionsKey)
}

func TestStatusPublisher(t *testing.T) {
	t0 := time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)
	plan := planner.Plan{Roll: []int{2, 1, 0}, Pods: []string{"etcd-0", "etcd-1", "etcd-2"}, UpdateRevision: "rev-b"}
	type call func(p *Publisher, l *lease.Lease)
	// emit is an event as the engine announces it: its kind and typed fields, and a Message nobody reads.
	emit := func(ev Event) call {
		ev.Time = t0
		return func(p *Publisher, _ *lease.Lease) { p.Observe(ev) }
	}
	record := func(typ, reason, msg string) call {
		return func(p *Publisher, _ *lease.Lease) { p.ObserveOutcome(t0, typ, reason, msg) }
	}
	acquire := func(at time.Time) call { return func(_ *Publisher, l *lease.Lease) { leaseAcquiredAt(l, at) } }
	release := func(_ *Publisher, l *lease.Lease) { l.Set(nil) }
	planned := emit(Event{Kind: EventPlanned, Plan: &plan, Message: "plan: …"})

	tests := []struct {
		name  string
		calls []call
		// want maps data keys to values; a key mapped to "" must be absent or empty. nil: nothing written.
		want map[string]string
		// wantFailedReason is the Failed condition's reason.
		wantFailedReason string
	}{
		{
			name:  "nothing is published by a run that does not hold the lease",
			calls: []call{emit(Event{Message: "lease db/etcd-etcd-rollout is held by x: watching it"})},
		},
		{
			name:  "a took-over line alone (unlock) does not start a status that would never end",
			calls: []call{acquire(t0), emit(Event{Kind: EventTookOver, PreviousHolder: "x", Message: "took over the stale lease of x"}), release},
		},
		{
			name:  "a planned run is progressing",
			calls: []call{acquire(t0), planned, emit(Event{Step: planner.Step{Kind: planner.StepLowerPartition, Ordinal: 2}, Message: "restarting etcd-2 (partition 2)"})},
			want: map[string]string{"Progressing": "True", "MembersUpdated": "False", "Failed": "False",
				"targetRevision": "rev-b", "membersDone": "0", "members": "3", "pendingMembers": "etcd-0,etcd-1,etcd-2",
				"step": "lower-partition etcd-2", "message": "restarting etcd-2 (partition 2)"},
		},
		{
			name: "a rolled member and one already updated that passed its gates count as done",
			calls: []call{acquire(t0), emit(Event{Kind: EventPlanned, Plan: &planner.Plan{Roll: []int{2, 0}, Wait: []int{1}, Pods: plan.Pods, UpdateRevision: "rev-b"}}),
				emit(Event{Kind: EventMemberPassed, Step: planner.Step{Kind: planner.StepWaitMember, Ordinal: 1}, Pod: "etcd-1", Message: "etcd-1 is fine"}),
				emit(Event{Kind: EventMemberRolled, Step: planner.Step{Kind: planner.StepWaitMember, Ordinal: 2}, Pod: "etcd-2", Message: "reworded: etcd-2 is through"}),
				record(corev1.EventTypeNormal, ReasonMemberRolled, "Rolled etcd-2 to revision rev-b; etcd healthy after 2s")},
			want: map[string]string{"Progressing": "True", "MembersUpdated": "False", "membersDone": "2", "pendingMembers": "etcd-0"},
		},
		{
			name: "a member the run takes back out of its result is not done any more",
			calls: []call{acquire(t0), planned,
				emit(Event{Kind: EventMemberRolled, Step: planner.Step{Kind: planner.StepWaitMember, Ordinal: 2}, Pod: "etcd-2", Message: "etcd-2 rolled"}),
				emit(Event{Kind: EventMemberRolled, Step: planner.Step{Kind: planner.StepWaitMember, Ordinal: 1}, Pod: "etcd-1", Message: "etcd-1 rolled"}),
				emit(Event{Kind: EventMemberTakenBack, Step: planner.Step{Kind: planner.StepWaitMember, Ordinal: 2}, Pod: "etcd-2", Message: "etcd-2 did not stay up"})},
			want: map[string]string{"Progressing": "True", "MembersUpdated": "False", "membersDone": "1", "pendingMembers": "etcd-0,etcd-2"},
		},
		{
			name: "the done line completes the run",
			calls: []call{acquire(t0), planned, emit(Event{Kind: EventDone, Step: planner.Step{Kind: planner.StepRelock}, Summary: "3 members rolled", Message: "finished"}),
				record(corev1.EventTypeNormal, ReasonRolloutDone, "3 members rolled")},
			want:             map[string]string{"Progressing": "False", "MembersUpdated": "True", "Failed": "False", "membersDone": "3", "pendingMembers": ""},
			wantFailedReason: StatusReasonComplete,
		},
		{
			name: "a failure recorded after the lease was released ends the run failed",
			calls: []call{acquire(t0), planned, emit(Event{Step: planner.Step{Kind: planner.StepRelock}, Message: "partition re-locked"}), release,
				record(corev1.EventTypeWarning, ReasonRolloutFailed, "etcd-2 did not pass the etcd health gate")},
			want:             map[string]string{"Progressing": "False", "MembersUpdated": "False", "Failed": "True", "membersDone": "0"},
			wantFailedReason: ReasonRolloutFailed,
		},
		{
			name: "an unknown Warning while the run holds the lease is a failure, the run goes on",
			calls: []call{acquire(t0), planned,
				record(corev1.EventTypeWarning, ReasonMemberReverted, "Reverted etcd-2 to revision rev-a")},
			want:             map[string]string{"Progressing": "True", "MembersUpdated": "False", "Failed": "True"},
			wantFailedReason: ReasonMemberReverted,
		},
		{
			name: "an unknown Warning after the lease was released ends the run",
			calls: []call{acquire(t0), planned, release,
				record(corev1.EventTypeWarning, "EtcdSomethingNew", "went wrong")},
			want:             map[string]string{"Progressing": "False", "MembersUpdated": "False", "Failed": "True"},
			wantFailedReason: "EtcdSomethingNew",
		},
		{
			name: "a new run clears the last run's failure",
			calls: []call{acquire(t0), planned, release, record(corev1.EventTypeWarning, ReasonRolloutFailed, "boom"),
				acquire(t0.Add(time.Minute)), planned},
			want:             map[string]string{"Progressing": "True", "MembersUpdated": "False", "Failed": "False"},
			wantFailedReason: StatusReasonProgressing,
		},
		{
			name: "the snapshot a run stored is published, and kept through a later run that stores none",
			calls: []call{acquire(t0), planned,
				emit(Event{Kind: EventSnapshotStored, Snapshot: &snapshot.Record{Location: "s3://rollbacks/db/etcd/20261205T020000Z-r42.db"}}),
				release, record(corev1.EventTypeWarning, ReasonRolloutFailed, "etcd-2 did not pass"),
				acquire(t0.Add(time.Minute)), planned},
			want: map[string]string{"Progressing": "True", "snapshot": "s3://rollbacks/db/etcd/20261205T020000Z-r42.db"},
		},
		{
			name:  "a run refused before its first line is still published as failed",
			calls: []call{record(corev1.EventTypeWarning, ReasonRolloutFailed, "interference: partition is 1")},
			want:  map[string]string{"Progressing": "False", "MembersUpdated": "False", "Failed": "True", "targetRevision": "", "membersDone": ""},
		},
		{
			name: "PEM material never reaches the status",
			calls: []call{acquire(t0), planned, release, record(corev1.EventTypeWarning, ReasonRolloutFailed,
				"bad key: -----BEGIN EC PRIVATE KEY-----\nMHcCAQEEIBkg\n-----END EC PRIVATE KEY----- in volume tls")},
			want: map[string]string{"Failed": "True"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			kube := fake.NewClientset()
			l := &lease.Lease{Kube: kube, Namespace: "db", Name: lease.Name("etcd"), Holder: "me/1/ab", Duration: time.Second}
			p := NewPublisher(kube, "db", "etcd", "me/1/ab", "", l)
			t.Cleanup(p.Stop)
			for _, c := range tt.calls {
				c(p, l)
			}
			p.Stop()
			p.Flush(context.Background())

			cm, err := kube.CoreV1().ConfigMaps("db").Get(context.Background(), StatusConfigMapName("etcd"), metav1.GetOptions{})
			if tt.want == nil {
				require.True(t, apierrors.IsNotFound(err), "nothing written: %v", err)
				return
			}
			require.NoError(t, err)
			conds := progresstest.ConditionsOf(t, cm.Data)
			for k, v := range tt.want {
				assert.Equal(t, v, cm.Data[k], k)
			}
			if tt.wantFailedReason != "" {
				assert.Equal(t, tt.wantFailedReason, conds[ConditionFailed].Reason)
			}
			assert.Empty(t, cm.OwnerReferences, "no StatefulSet to own it in this fake")
			raw, _ := json.Marshal(cm.Data)
			assert.NotContains(t, string(raw), "MHcCAQEEIBkg")
			assert.NotContains(t, string(raw), "PRIVATE KEY-----")
		})
	}
}

// A condition keeps its lastTransitionTime while its status stays, across writes and across runs, and gets
// a new one when its status changes.
func TestStatusKeepsTransitionTimes(t *testing.T) {
	kube := fake.NewClientset()
	l := &lease.Lease{Kube: kube, Namespace: "db", Name: lease.Name("etcd"), Holder: "me", Duration: time.Second}
	p := NewPublisher(kube, "db", "etcd", "me", "", l)
	t.Cleanup(p.Stop)
	plan := planner.Plan{Roll: []int{0}, Pods: []string{"etcd-0"}, UpdateRevision: "rev-b"}
	t0 := time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)
	times := func() map[string]time.Time {
		p.Flush(context.Background())
		cm, err := kube.CoreV1().ConfigMaps("db").Get(context.Background(), StatusConfigMapName("etcd"), metav1.GetOptions{})
		require.NoError(t, err)
		out := map[string]time.Time{}
		for typ, c := range progresstest.ConditionsOf(t, cm.Data) {
			out[typ] = c.LastTransitionTime.UTC()
		}
		return out
	}

	leaseAcquiredAt(l, t0)
	p.Observe(Event{Time: t0, Kind: EventPlanned, Plan: &plan, Message: "plan: …"})
	first := times()
	p.Observe(Event{Time: t0.Add(time.Minute), Step: planner.Step{Kind: planner.StepWaitMember}, Message: "etcd-0 recreated"})
	assert.Equal(t, first, times(), "no status changed, no transition")

	p.Observe(Event{Time: t0.Add(2 * time.Minute), Kind: EventDone, Step: planner.Step{Kind: planner.StepRelock}, Summary: "1 member rolled", Message: "done: 1 member rolled"})
	done := times()
	assert.Equal(t, t0.Add(2*time.Minute), done[ConditionProgressing])
	assert.Equal(t, t0.Add(2*time.Minute), done[ConditionMembersUpdated])
	assert.Equal(t, t0, done[ConditionFailed], "Failed stayed False")

	// Another process (a fresh publisher) starts the next run: it reads the times back from the cluster.
	l.Set(nil)
	p2 := NewPublisher(kube, "db", "etcd", "other", "", l)
	t.Cleanup(p2.Stop)
	leaseAcquiredAt(l, t0.Add(time.Hour))
	p2.Observe(Event{Time: t0.Add(time.Hour), Kind: EventPlanned, Plan: &plan, Message: "plan: …"})
	p.Stop()
	p2.Flush(context.Background())
	p = p2
	next := times()
	assert.Equal(t, t0.Add(time.Hour), next[ConditionProgressing])
	assert.Equal(t, t0, next[ConditionFailed], "still False since the first run")
}
