package rollout

import (
	"cmp"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	k8stesting "k8s.io/client-go/testing"
	"k8s.io/utils/ptr"

	"github.com/etcd-rollout/pulumi-etcd-rollout/rollout/internal/gate"
	"github.com/etcd-rollout/pulumi-etcd-rollout/rollout/internal/lease"
	"github.com/etcd-rollout/pulumi-etcd-rollout/rollout/internal/planner"
)

// The schedule checks judge writes by the fakes' truth and hold a fault against an engine only once it could
// have known it. These cases pin both halves: each invariant fires on a breach, and a fault the engine could
// not have seen (a crash after its last look, a member merely unreachable to it) is no breach.
func TestScheduleChecksJudgeByTruth(t *testing.T) {
	tests := []struct {
		name string
		// updated are the members already at the update revision; members is 3 unless set.
		updated []int
		members int
		// setup prepares the world and what run-1 knows, then act makes run-1's write and judges it.
		setup func(w *world, se *schedEngine)
		act   func(w *world, se *schedEngine)
		want  []string // invariants violated, in order
	}{
		{
			name:  "a lowering for one member while the others are up",
			setup: func(w *world, se *schedEngine) {}, act: lowerTo(2),
		},
		{
			name:  "a lowering without a gate permit",
			setup: func(w *world, se *schedEngine) { se.permits = nil }, act: lowerTo(2),
			want: []string{"p"},
		},
		{
			name: "a delete under a permit for another member",
			setup: func(w *world, se *schedEngine) {
				se.permits = se.permits[:0]
				se.notePermit(gate.Permit{Kind: gate.DeletePod, Ordinal: 1, LeaseUntil: time.Now().Add(time.Hour)})
			},
			act: deletePod("etcd-2"), want: []string{"p"},
		},
		{
			name:  "a delete under a permit whose lease ran out",
			setup: func(w *world, se *schedEngine) { permitEverything(se, 3, time.Now().Add(-time.Second)) },
			act:   deletePod("etcd-2"), want: []string{"p"},
		},
		{
			name: "a member removed under a restart's permit only",
			setup: func(w *world, se *schedEngine) {
				se.permits = se.permits[:0]
				se.notePermit(gate.Permit{Kind: gate.Restart, Ordinal: 2, LeaseUntil: time.Now().Add(time.Hour)})
			},
			act: removeMember("etcd-2"), want: []string{"p"},
		},
		{
			name:  "a lowering that exposes two members off the update revision",
			setup: func(w *world, se *schedEngine) {}, act: lowerTo(1),
			want: []string{"a", "b"},
		},
		{
			name: "a delete while another member is down and the last look found it so",
			setup: func(w *world, se *schedEngine) {
				w.crash("etcd-0", 0)
				se.lastStatus["etcd-0"] = statusLook{at: w.now(), down: true}
			},
			act: deletePod("etcd-2"), want: []string{"b"},
		},
		{
			name: "a delete while another member crashed after the last look at it",
			setup: func(w *world, se *schedEngine) {
				se.lastStatus["etcd-0"] = statusLook{at: w.now()}
				w.crash("etcd-0", 0)
			},
			act: deletePod("etcd-2"),
		},
		{
			name: "a delete while another member is only unreachable to us",
			setup: func(w *world, se *schedEngine) {
				w.unreachable["etcd-0"] = unreach{}
				se.lastStatus["etcd-0"] = statusLook{at: w.now()}
			},
			act: deletePod("etcd-2"),
		},
		{
			name: "a lowering while a member on the update revision crash-loops fast and was looked at", updated: []int{2},
			setup: func(w *world, se *schedEngine) {
				w.badRevs[newRev] = true
				w.syncLoops()
				se.lastCall["etcd-2"] = w.now()
			},
			act: lowerTo(1), want: []string{"b"},
		},
		{
			name: "a lowering while a member crash-loops that the engine never looked at", updated: []int{2},
			setup: func(w *world, se *schedEngine) {
				w.badRevs[newRev] = true
				w.syncLoops()
			},
			act: lowerTo(1),
		},
		{
			name: "a lowering while a member the engine saw pass since its loop began flaps unseen", updated: []int{2},
			setup: func(w *world, se *schedEngine) {
				w.badRevs[newRev] = true
				w.syncLoops()
				se.passedAt["etcd-2"] = w.now()
				se.lastCall["etcd-2"] = w.now()
			},
			act: lowerTo(1),
		},
		{
			name: "a lowering right after the member that passed restarted and flaps", updated: []int{2},
			setup: func(w *world, se *schedEngine) {
				se.passedAt["etcd-2"] = w.now()
				w.flapAfterPass(se, "etcd-2")
			},
			act: lowerTo(1), want: []string{"b"},
		},
		{
			name: "a run that returns right after the member that passed restarted and flaps", updated: []int{2},
			setup: func(w *world, se *schedEngine) {
				se.passedAt["etcd-2"] = w.now()
				w.flapAfterPass(se, "etcd-2")
			},
			act: func(w *world, se *schedEngine) {
				w.checkExit(se, Result{UpdateRevision: newRev, MembersRolled: []string{"etcd-2"}}, nil)
			},
		},
		{
			name: "a lowering while a member our writes disrupted is down after someone else replaced its pod",
			setup: func(w *world, se *schedEngine) {
				w.disrupted["etcd-0"] = true
				w.deleteByOther("etcd-0", time.Second)
				se.lastStatus["etcd-0"] = statusLook{at: w.now(), down: true}
			},
			act: lowerTo(2), want: []string{"b"},
		},
		{
			name:    "a lowering of one of five while a member our writes disrupted is down after someone else replaced its pod",
			members: 5,
			setup: func(w *world, se *schedEngine) {
				w.disrupted["etcd-0"] = true
				w.deleteByOther("etcd-0", time.Second)
				se.lastStatus["etcd-0"] = statusLook{at: w.now(), down: true}
			},
			act: lowerTo(4),
		},
		{
			name:  "a lowering while someone else holds the lease",
			setup: func(w *world, se *schedEngine) { holdLease(t, w, "second-1") },
			act:   lowerTo(2), want: []string{"d"},
		},
		{
			name:  "a run that returns with its own lowering in place",
			setup: func(w *world, se *schedEngine) {}, act: func(w *world, se *schedEngine) {
				lowerTo(2)(w, se)
				w.checkExit(se, Result{}, nil)
			},
			want: []string{"c"},
		},
		{
			name:  "a run that reports an election the fake did not count",
			setup: func(w *world, se *schedEngine) {},
			act: func(w *world, se *schedEngine) {
				w.checkExit(se, Result{TermBefore: 2, TermAfter: 3, UnplannedElections: 1}, nil)
			},
			want: []string{"e"},
		},
		{
			name:  "a run that fails a member nothing happened to",
			setup: func(w *world, se *schedEngine) {},
			act: func(w *world, se *schedEngine) {
				w.checkExit(se, Result{}, fmt.Errorf("rolling etcd-2: %w", &GateTimeoutError{Pod: "etcd-2", Gate: GateEtcdHealth}))
			},
			want: []string{"f"},
		},
		{
			name: "a run that fails a member the schedule crashed",
			setup: func(w *world, se *schedEngine) {
				w.apply(se, schedEvent{Kind: evCrash, Pod: 2}, "")
			},
			act: func(w *world, se *schedEngine) {
				w.checkExit(se, Result{}, fmt.Errorf("rolling etcd-2: %w", &GateTimeoutError{Pod: "etcd-2", Gate: GateEtcdHealth}))
			},
		},
		{
			name:  "a member removed while the others are up",
			setup: func(w *world, se *schedEngine) {}, act: removeMember("etcd-2"),
		},
		{
			name: "a member removed while another member is down and the last look found it so",
			setup: func(w *world, se *schedEngine) {
				w.crash("etcd-0", 0)
				se.lastStatus["etcd-0"] = statusLook{at: w.now(), down: true}
			},
			act: removeMember("etcd-2"), want: []string{"b"},
		},
		{
			name:  "a pod delete that brings a member whose data died with its pod back under its old ID",
			setup: func(w *world, se *schedEngine) { w.f.membership.ephemeral = true },
			act:   deleteThroughTheAPI("etcd-2"), want: []string{"g"},
		},
		{
			name: "a pod delete after its member was removed: it waits to be added back, nothing adopted",
			setup: func(w *world, se *schedEngine) {
				w.f.membership.ephemeral = true
				removeMember("etcd-2")(w, se)
			},
			act: deleteThroughTheAPI("etcd-2"),
		},
		{
			name:  "a run that reports a member rolled that is back on the old revision",
			setup: func(w *world, se *schedEngine) {},
			act: func(w *world, se *schedEngine) {
				w.checkExit(se, Result{UpdateRevision: newRev, MembersRolled: []string{"etcd-2"}}, nil)
			},
			want: []string{"e"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			w := newWorld(t, schedule{Members: cmp.Or(tt.members, 3), Leader: 0, Updated: tt.updated})
			se := newSchedEngine(w, "run-1", 1)
			holdLease(t, w, "run-1")
			permitEverything(se, cmp.Or(tt.members, 3), time.Now().Add(time.Hour))
			w.mu.Lock()
			defer w.mu.Unlock()
			tt.setup(w, se)
			tt.act(w, se)
			var got []string
			for _, v := range w.violations {
				got = append(got, v.invariant)
			}
			assert.Equal(t, tt.want, got, "%v", w.violations)
		})
	}
}

// permitEverything gives se's run a gate permit of every kind for every member, with the lease until until: the
// writes these cases make are judged by the other invariants, and (p)'s own cases take the permits away.
func permitEverything(se *schedEngine, members int, until time.Time) {
	se.permits = nil
	for _, k := range gate.Kinds() {
		for o := range members {
			se.notePermit(gate.Permit{Kind: k, Ordinal: o, Pod: planner.PodName("etcd", o), LeaseUntil: until})
		}
	}
}

// lowerTo is run-1's partition write to p, judged as the request hook judges it (w.mu is held).
func lowerTo(p int) func(w *world, se *schedEngine) {
	return func(w *world, se *schedEngine) {
		pre := w.snapshot()
		sts := w.stsNow().DeepCopy()
		sts.Spec.UpdateStrategy.RollingUpdate = &appsv1.RollingUpdateStatefulSetStrategy{Partition: ptr.To(int32(p))}
		if err := w.c.kube.Tracker().Update(stsGVR, sts, "db"); err != nil {
			w.t.Fatal(err)
		}
		w.judgePartition(se, pre, w.snapshot())
	}
}

// deletePod is run-1's delete of pod, judged as the request hook judges it (w.mu is held).
func deletePod(pod string) func(w *world, se *schedEngine) {
	return func(w *world, se *schedEngine) {
		pre := w.snapshot()
		w.judgeDelete(se, pre, w.snapshot(), pod)
	}
}

// removeMember is run-1's MemberRemove of pod's member, judged as the etcd hook judges it (w.mu is held). It
// lands whatever etcd's own reconfiguration check would say (an etcd run with --strict-reconfig-check=false):
// the checks must see the breach, not count on etcd to refuse it.
func removeMember(pod string) func(w *world, se *schedEngine) {
	return func(w *world, se *schedEngine) {
		pre := w.snapshot()
		w.f.mu.Lock()
		w.f.membership.mark(&w.f.membership.removed, pod)
		w.f.down[pod] = true
		w.f.mu.Unlock()
		w.judgeMembership(se, pre, "removed "+pod, pod, time.Now())
	}
}

// deleteThroughTheAPI is run-1's delete of pod sent to the fake cluster (whose controller recreates it) and
// judged as the request hook judges it (w.mu is held).
func deleteThroughTheAPI(pod string) func(w *world, se *schedEngine) {
	return func(w *world, se *schedEngine) {
		pre := w.snapshot()
		del := k8stesting.NewDeleteAction(podGVR, "db", pod)
		_, err := w.c.kube.Invokes(del, nil)
		require.NoError(w.t, err)
		w.judgeRequest(se, del, pre, err)
	}
}

// holdLease makes holder the Lease's holder in the tracker.
func holdLease(t *testing.T, w *world, holder string) {
	t.Helper()
	lease := &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: lease.Name("etcd"), Namespace: "db"},
		Spec: coordinationv1.LeaseSpec{HolderIdentity: ptr.To(holder)}}
	if _, err := w.c.kube.Tracker().Get(scheduleLeaseGVR, "db", lease.Name); err == nil {
		require.NoError(t, w.c.kube.Tracker().Update(scheduleLeaseGVR, lease, "db"))
		return
	}
	require.NoError(t, w.c.kube.Tracker().Create(scheduleLeaseGVR, lease, "db"))
}
