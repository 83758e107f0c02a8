//go:build faults

package faults_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"

	"github.com/etcd-rollout/pulumi-etcd-rollout/rollout"
)

// etcd1InFlight is the event of a run that has lowered the partition to 1 and waits for the controller to
// recreate etcd-1 (it locks the partition again once etcd-1 exists at the update revision).
func etcd1InFlight(e rollout.Event) bool {
	return memberEvent(e, rollout.EventPartitionLowered, "etcd-1")
}

func etcd2Rolled(e rollout.Event) bool { return rolled(e, "etcd-2") }

// Someone else writes the StatefulSet while a rollout runs: the engine notices at its next look, stops
// with an error that says what changed and what to do, re-locks, and never rolls another member.
func TestSomeoneElseChangesTheStatefulSet(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	cases := []struct {
		name string
		when func(rollout.Event) bool // the event after which someone else writes
		// etcd1Hangs makes etcd-1 hang on its SIGTERM, so that it is still in flight when someone writes.
		etcd1Hangs bool
		change     func(ctx context.Context) error
		want       string
	}{
		{"the partition is lowered between two members", etcd2Rolled, false, func(ctx context.Context) error {
			return f.etcd.SetPartition(ctx, 2) // etcd-2 is already updated: nothing else restarts by it
		}, ", partition 2; stopping rather than racing it"},
		{"the template is edited between two members", etcd2Rolled, false, func(ctx context.Context) error {
			_, err := f.etcd.UpdateTemplate(ctx, func(tpl *corev1.PodTemplateSpec) {
				tpl.Annotations["someone-else"] = time.Now().String()
			})
			return err
		}, "(started with"},
		// etcd-1 hangs on its SIGTERM for the 5 s grace period, so it cannot be Ready again for that long,
		// and the StatefulSet controller (OrderedReady) will not touch etcd-0 before it is: the run must
		// notice the lowered partition and re-lock within that time, which it does at its next poll.
		{"the partition is lowered to 0 while etcd-1 is in flight", etcd1InFlight, true, func(ctx context.Context) error {
			return f.etcd.SetPartition(ctx, 0)
		}, "while waiting for etcd-1: partition 0 (this run set 1)"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			f.t = t
			f.must.ChangeTemplate("")
			f.must.PlaceLeader(0)
			if tc.etcd1Hangs {
				ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
				defer cancel()
				require.NoError(t, f.etcd.HangOnTerm(ctx, 1, true))
			}
			_, uidsBefore := f.must.Pods()
			res, err := f.engine(func(_ *rollout.Config, o *rollout.Options) {
				log := o.OnEvent
				o.OnEvent = func(e rollout.Event) {
					log(e)
					if tc.when(e) {
						ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
						defer cancel()
						require.NoError(t, tc.change(ctx))
					}
				}
			}).Run(runCtx(t))
			require.ErrorIs(t, err, rollout.ErrInterference)
			t.Logf("error: %v", err)
			assert.Contains(t, err.Error(), tc.want)
			assert.Contains(t, err.Error(), "find who changed it")
			assert.Equal(t, []string{"etcd-2"}, res.MembersRolled)
			require.Equal(t, 3, f.must.Partition(), "re-locked")
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			if tc.etcd1Hangs {
				_, err := f.etcd.WaitPodRecreated(ctx, 1, uidsBefore[1]) // it was on its way already
				require.NoError(t, err)
			}
			_, uidsAfter := f.must.Pods()
			assert.NotContains(t, restarted(uidsBefore, uidsAfter), 0, "etcd-0 was never restarted")
			if !tc.etcd1Hangs { // etcd-1 was not in flight
				assert.Equal(t, []int{2}, restarted(uidsBefore, uidsAfter), "no member rolled after the change")
			}
			require.NoError(t, f.etcd.WaitHealthy(ctx))
			// Finish the rollout, so the next case starts from every member at one revision.
			_, err = f.engine(nil).Run(runCtx(t))
			require.NoError(t, err)
			f.requireState(f.must.StatefulSet().Status.UpdateRevision)
		})
	}
}
