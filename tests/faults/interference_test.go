//go:build faults

package faults_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"

	"github.com/etcd-rollout/pulumi-etcd-rollout/rollout"
)

// Someone else writes the StatefulSet while a rollout runs: the engine notices at its next look, stops
// with an error that says what changed and what to do, re-locks, and never rolls another member.
func TestSomeoneElseChangesTheStatefulSet(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	cases := []struct {
		name   string
		change func(ctx context.Context) error
		want   string
	}{
		{"the partition is lowered", func(ctx context.Context) error {
			return f.etcd.SetPartition(ctx, 2) // etcd-2 is already updated: nothing else restarts by it
		}, ", partition 2; stopping rather than racing it"},
		{"the template is edited", func(ctx context.Context) error {
			_, err := f.etcd.UpdateTemplate(ctx, func(tpl *corev1.PodTemplateSpec) {
				tpl.Annotations["someone-else"] = time.Now().String()
			})
			return err
		}, "(started with"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			f.t = t
			f.changeTemplate()
			_, uidsBefore := f.pods()
			res, err := f.engine(func(_ *rollout.Config, o *rollout.Options) {
				log := o.OnEvent
				o.OnEvent = func(e rollout.Event) {
					log(e)
					if strings.HasPrefix(e.Message, "etcd-2 rolled") {
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
			require.Equal(t, 3, f.partition(), "re-locked")
			_, uidsAfter := f.pods()
			assert.Equal(t, []int{2}, restarted(uidsBefore, uidsAfter), "no member rolled after the change")
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			require.NoError(t, f.etcd.WaitHealthy(ctx))
			// Finish the rollout, so the next case starts from every member at one revision.
			_, err = f.engine(nil).Run(runCtx(t))
			require.NoError(t, err)
			f.requireState(f.sts().Status.UpdateRevision)
		})
	}
}
