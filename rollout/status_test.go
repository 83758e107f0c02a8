package rollout

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
	"k8s.io/utils/ptr"

	"github.com/etcd-rollout/pulumi-etcd-rollout/rollout/internal/lease"
)

// statusData reads the status ConfigMap of the fake cluster's StatefulSet.
func statusData(t *testing.T, c *fakeCluster) map[string]string {
	t.Helper()
	cm, err := c.kube.CoreV1().ConfigMaps("db").Get(context.Background(), StatusConfigMapName("etcd"), metav1.GetOptions{})
	require.NoError(t, err)
	return cm.Data
}

// conditionsOf decodes the "conditions" key and checks each condition has the usual shape.
func conditionsOf(t *testing.T, data map[string]string) map[string]metav1.Condition {
	t.Helper()
	var list []metav1.Condition
	require.NoError(t, json.Unmarshal([]byte(data[StatusKeyConditions]), &list))
	out := map[string]metav1.Condition{}
	for _, c := range list {
		assert.NotEmpty(t, c.Reason, c.Type)
		assert.Regexp(t, `^[A-Za-z]([A-Za-z0-9_,:]*[A-Za-z0-9_])?$`, c.Reason, "a valid metav1.Condition reason")
		assert.False(t, c.LastTransitionTime.IsZero(), c.Type)
		assert.Equal(t, string(c.Status), data[c.Type], "the %s key says the condition's status", c.Type)
		out[c.Type] = c
	}
	return out
}

func TestStatusThroughRun(t *testing.T) {
	tests := []struct {
		name    string
		updated []int // members already at the new revision
		setup   func(c *fakeCluster)
		mutate  func(cfg *Config, o *Options)
		wantErr bool
		// want is the status of each condition; wantReason the Failed condition's reason.
		want       map[string]metav1.ConditionStatus
		wantReason string
		wantDone   string
	}{
		{
			name: "a full roll ends with every member updated",
			want: map[string]metav1.ConditionStatus{ConditionProgressing: "False", ConditionMembersUpdated: "True", ConditionFailed: "False"},
			// the Failed condition is False because the roll completed
			wantReason: StatusReasonComplete, wantDone: "3",
		},
		{
			name: "a run with nothing to roll says the members are updated", updated: []int{0, 1, 2},
			want:       map[string]metav1.ConditionStatus{ConditionProgressing: "False", ConditionMembersUpdated: "True", ConditionFailed: "False"},
			wantReason: StatusReasonComplete, wantDone: "3",
		},
		{
			name:   "a member that never comes back fails the run",
			setup:  func(c *fakeCluster) { c.etcd.brokenAfterRestart["etcd-2"] = true },
			mutate: func(cfg *Config, _ *Options) { cfg.HealthTimeout = 300 * time.Millisecond },
			want:   map[string]metav1.ConditionStatus{ConditionProgressing: "False", ConditionMembersUpdated: "False", ConditionFailed: "True"},
			// wantDone: nothing rolled before etcd-2 failed
			wantErr: true, wantReason: ReasonRolloutFailed, wantDone: "0",
		},
		{
			name:    "a run refused before any disruption is a failed run",
			setup:   func(c *fakeCluster) { c.etcd.stop("etcd-0") },
			want:    map[string]metav1.ConditionStatus{ConditionProgressing: "False", ConditionMembersUpdated: "False", ConditionFailed: "True"},
			wantErr: true, wantReason: ReasonRolloutFailed,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := newFakeCluster(t, 3, 1, tt.updated...)
			if tt.setup != nil {
				tt.setup(c)
			}
			_, err := c.engine(t, func(cfg *Config, o *Options) {
				cfg.TemplateVersion = "hash-2"
				if tt.mutate != nil {
					tt.mutate(cfg, o)
				}
			}).Run(context.Background())
			if tt.wantErr {
				require.Error(t, err)
			} else {
				require.NoError(t, err)
			}
			data := statusData(t, c)
			conds := conditionsOf(t, data)
			for typ, status := range tt.want {
				assert.Equal(t, status, conds[typ].Status, typ)
			}
			assert.Equal(t, tt.wantReason, conds[ConditionFailed].Reason)
			assert.Equal(t, tt.wantDone, data[StatusKeyMembersDone])
			if tt.wantDone != "" {
				assert.Equal(t, newRev, data[StatusKeyTargetRevision])
				assert.Equal(t, "hash-2", data[StatusKeyTemplateVersion], "the caller's name for the target revision's template")
				assert.Equal(t, "3", data[StatusKeyMembers])
			}
			assert.NotEmpty(t, data[StatusKeyRun])
			assert.NotEmpty(t, data[StatusKeyUpdatedAt])

			cm, err := c.kube.CoreV1().ConfigMaps("db").Get(context.Background(), StatusConfigMapName("etcd"), metav1.GetOptions{})
			require.NoError(t, err)
			require.Len(t, cm.OwnerReferences, 1, "collected with its StatefulSet")
			assert.Equal(t, "StatefulSet", cm.OwnerReferences[0].Kind)
			assert.EqualValues(t, "sts-uid", cm.OwnerReferences[0].UID)
		})
	}
}

// Mid-run the status says what is going on and never claims the members are updated.
func TestStatusMidRun(t *testing.T) {
	c := newFakeCluster(t, 3, 1)
	var e *Engine
	var mid map[string]string
	e = c.engine(t, func(_ *Config, o *Options) {
		o.OnEvent = func(ev Event) {
			if strings.HasPrefix(ev.Message, "partition lowered to 0") {
				e.status.flush(context.Background()) // the background write, made now
				mid = statusData(t, c)
			}
		}
	})
	_, err := e.Run(context.Background())
	require.NoError(t, err)

	require.NotNil(t, mid, "the status was read mid-run")
	conds := conditionsOf(t, mid)
	assert.Equal(t, metav1.ConditionTrue, conds[ConditionProgressing].Status)
	assert.Equal(t, metav1.ConditionFalse, conds[ConditionMembersUpdated].Status)
	assert.Equal(t, metav1.ConditionFalse, conds[ConditionFailed].Status)
	assert.Equal(t, "2 of 3 members at revision "+newRev+" and healthy", conds[ConditionMembersUpdated].Message)
	assert.Equal(t, "2", mid[StatusKeyMembersDone])
	assert.Equal(t, "etcd-0", mid[StatusKeyPending])
	assert.Equal(t, "wait-member etcd-0", mid[StatusKeyStep])
	assert.Contains(t, mid[StatusKeyMessage], "partition lowered to 0")
	assert.Equal(t, newRev, mid[StatusKeyTargetRevision])

	st, found, err := e.RolloutStatus(context.Background())
	require.NoError(t, err)
	require.True(t, found)
	assert.Equal(t, 3, st.MembersDone)
	assert.Equal(t, 3, st.Members)
	assert.Empty(t, st.PendingMembers)
	assert.Equal(t, newRev, st.TargetRevision)
	require.Len(t, st.Conditions, 3)
	assert.Equal(t, []string{ConditionProgressing, ConditionMembersUpdated, ConditionFailed},
		[]string{st.Conditions[0].Type, st.Conditions[1].Type, st.Conditions[2].Type})
}

// A status that cannot be written never fails or slows the rollout.
func TestStatusWritesAreBestEffort(t *testing.T) {
	tests := []struct {
		name string
		err  error
	}{
		{"forbidden", apierrors.NewForbidden(schema.GroupResource{Resource: "configmaps"}, StatusConfigMapName("etcd"), errors.New("no rule"))},
		{"API server away", apierrors.NewServiceUnavailable("apiserver restarting")},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := newFakeCluster(t, 3, 1)
			for _, verb := range []string{"get", "create", "update"} {
				c.kube.PrependReactor(verb, "configmaps", func(k8stesting.Action) (bool, runtime.Object, error) {
					return true, nil, tt.err
				})
			}
			res, err := c.engine(t, nil).Run(context.Background())
			require.NoError(t, err)
			assert.Len(t, res.MembersRolled, 3)
			assert.Equal(t, []string{newRev, newRev, newRev}, c.revisions())
		})
	}
}

// leaseAcquiredAt makes l held by this process since at, as acquire leaves it.
func leaseAcquiredAt(l *lease.Lease, at time.Time) {
	now := metav1.NewMicroTime(at)
	l.Set(&coordinationv1.Lease{Spec: coordinationv1.LeaseSpec{HolderIdentity: ptr.To(l.Holder), AcquireTime: &now}})
}

func TestStatusPublisher(t *testing.T) {
	t0 := time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)
	plan := Plan{Roll: []int{2, 1, 0}, Pods: []string{"etcd-0", "etcd-1", "etcd-2"}, UpdateRevision: "rev-b"}
	type call func(p *statusPublisher, l *lease.Lease)
	// emit is an event as the engine announces it: its kind and typed fields, and a Message nobody reads.
	emit := func(ev Event) call {
		ev.Time = t0
		return func(p *statusPublisher, _ *lease.Lease) { p.observe(ev) }
	}
	record := func(typ, reason, msg string) call {
		return func(p *statusPublisher, _ *lease.Lease) { p.observeOutcome(t0, typ, reason, msg) }
	}
	acquire := func(at time.Time) call { return func(_ *statusPublisher, l *lease.Lease) { leaseAcquiredAt(l, at) } }
	release := func(_ *statusPublisher, l *lease.Lease) { l.Set(nil) }
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
			calls: []call{acquire(t0), planned, emit(Event{Step: Step{Kind: StepLowerPartition, Ordinal: 2}, Message: "restarting etcd-2 (partition 2)"})},
			want: map[string]string{"Progressing": "True", "MembersUpdated": "False", "Failed": "False",
				"targetRevision": "rev-b", "membersDone": "0", "members": "3", "pendingMembers": "etcd-0,etcd-1,etcd-2",
				"step": "lower-partition etcd-2", "message": "restarting etcd-2 (partition 2)"},
		},
		{
			name: "a rolled member and one already updated that passed its gates count as done",
			calls: []call{acquire(t0), emit(Event{Kind: EventPlanned, Plan: &Plan{Roll: []int{2, 0}, Wait: []int{1}, Pods: plan.Pods, UpdateRevision: "rev-b"}}),
				emit(Event{Kind: EventMemberPassed, Step: Step{Kind: StepWaitMember, Ordinal: 1}, Pod: "etcd-1", Message: "etcd-1 is fine"}),
				emit(Event{Kind: EventMemberRolled, Step: Step{Kind: StepWaitMember, Ordinal: 2}, Pod: "etcd-2", Message: "reworded: etcd-2 is through"}),
				record(corev1.EventTypeNormal, ReasonMemberRolled, "Rolled etcd-2 to revision rev-b; etcd healthy after 2s")},
			want: map[string]string{"Progressing": "True", "MembersUpdated": "False", "membersDone": "2", "pendingMembers": "etcd-0"},
		},
		{
			name: "a member the run takes back out of its result is not done any more",
			calls: []call{acquire(t0), planned,
				emit(Event{Kind: EventMemberRolled, Step: Step{Kind: StepWaitMember, Ordinal: 2}, Pod: "etcd-2", Message: "etcd-2 rolled"}),
				emit(Event{Kind: EventMemberRolled, Step: Step{Kind: StepWaitMember, Ordinal: 1}, Pod: "etcd-1", Message: "etcd-1 rolled"}),
				emit(Event{Kind: EventMemberTakenBack, Step: Step{Kind: StepWaitMember, Ordinal: 2}, Pod: "etcd-2", Message: "etcd-2 did not stay up"})},
			want: map[string]string{"Progressing": "True", "MembersUpdated": "False", "membersDone": "1", "pendingMembers": "etcd-0,etcd-2"},
		},
		{
			name: "the done line completes the run",
			calls: []call{acquire(t0), planned, emit(Event{Kind: EventDone, Step: Step{Kind: StepRelock}, Summary: "3 members rolled", Message: "finished"}),
				record(corev1.EventTypeNormal, ReasonRolloutDone, "3 members rolled")},
			want:             map[string]string{"Progressing": "False", "MembersUpdated": "True", "Failed": "False", "membersDone": "3", "pendingMembers": ""},
			wantFailedReason: StatusReasonComplete,
		},
		{
			name: "a failure recorded after the lease was released ends the run failed",
			calls: []call{acquire(t0), planned, emit(Event{Step: Step{Kind: StepRelock}, Message: "partition re-locked"}), release,
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
				emit(Event{Kind: EventSnapshotStored, Snapshot: &SnapshotRecord{Location: "s3://rollbacks/db/etcd/20261205T020000Z-r42.db"}}),
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
			p := newStatusPublisher(kube, Config{StatefulSet: "etcd", Namespace: "db", Holder: "me/1/ab"}, l)
			t.Cleanup(p.stop)
			for _, c := range tt.calls {
				c(p, l)
			}
			p.stop()
			p.flush(context.Background())

			cm, err := kube.CoreV1().ConfigMaps("db").Get(context.Background(), StatusConfigMapName("etcd"), metav1.GetOptions{})
			if tt.want == nil {
				require.True(t, apierrors.IsNotFound(err), "nothing written: %v", err)
				return
			}
			require.NoError(t, err)
			conds := conditionsOf(t, cm.Data)
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
	p := newStatusPublisher(kube, Config{StatefulSet: "etcd", Namespace: "db", Holder: "me"}, l)
	t.Cleanup(p.stop)
	plan := Plan{Roll: []int{0}, Pods: []string{"etcd-0"}, UpdateRevision: "rev-b"}
	t0 := time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)
	times := func() map[string]time.Time {
		p.flush(context.Background())
		cm, err := kube.CoreV1().ConfigMaps("db").Get(context.Background(), StatusConfigMapName("etcd"), metav1.GetOptions{})
		require.NoError(t, err)
		out := map[string]time.Time{}
		for typ, c := range conditionsOf(t, cm.Data) {
			out[typ] = c.LastTransitionTime.UTC()
		}
		return out
	}

	leaseAcquiredAt(l, t0)
	p.observe(Event{Time: t0, Kind: EventPlanned, Plan: &plan, Message: "plan: …"})
	first := times()
	p.observe(Event{Time: t0.Add(time.Minute), Step: Step{Kind: StepWaitMember}, Message: "etcd-0 recreated"})
	assert.Equal(t, first, times(), "no status changed, no transition")

	p.observe(Event{Time: t0.Add(2 * time.Minute), Kind: EventDone, Step: Step{Kind: StepRelock}, Summary: "1 member rolled", Message: "done: 1 member rolled"})
	done := times()
	assert.Equal(t, t0.Add(2*time.Minute), done[ConditionProgressing])
	assert.Equal(t, t0.Add(2*time.Minute), done[ConditionMembersUpdated])
	assert.Equal(t, t0, done[ConditionFailed], "Failed stayed False")

	// Another process (a fresh publisher) starts the next run: it reads the times back from the cluster.
	l.Set(nil)
	p2 := newStatusPublisher(kube, Config{StatefulSet: "etcd", Namespace: "db", Holder: "other"}, l)
	t.Cleanup(p2.stop)
	leaseAcquiredAt(l, t0.Add(time.Hour))
	p2.observe(Event{Time: t0.Add(time.Hour), Kind: EventPlanned, Plan: &plan, Message: "plan: …"})
	p2.stop()
	p2.flush(context.Background())
	p = p2
	next := times()
	assert.Equal(t, t0.Add(time.Hour), next[ConditionProgressing])
	assert.Equal(t, t0, next[ConditionFailed], "still False since the first run")
}
