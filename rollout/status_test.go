package rollout

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	k8stesting "k8s.io/client-go/testing"

	"github.com/etcd-rollout/pulumi-etcd-rollout/rollout/internal/progress/progresstest"
)

// statusData reads the status ConfigMap of the fake cluster's StatefulSet.
func statusData(t *testing.T, c *fakeCluster) map[string]string {
	t.Helper()
	cm, err := c.kube.CoreV1().ConfigMaps("db").Get(context.Background(), StatusConfigMapName("etcd"), metav1.GetOptions{})
	require.NoError(t, err)
	return cm.Data
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
			conds := progresstest.ConditionsOf(t, data)
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
				e.status.Flush(context.Background()) // the background write, made now
				mid = statusData(t, c)
			}
		}
	})
	_, err := e.Run(context.Background())
	require.NoError(t, err)

	require.NotNil(t, mid, "the status was read mid-run")
	conds := progresstest.ConditionsOf(t, mid)
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
