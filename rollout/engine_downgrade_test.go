package rollout

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"

	"github.com/etcd-rollout/pulumi-etcd-rollout/rollout/internal/member"
	"github.com/etcd-rollout/pulumi-etcd-rollout/rollout/internal/planner"
)

// newDowngradeCluster is a 3-member cluster on etcd 3.6.8 (cluster and storage version 3.6.0) whose template
// runs 3.5.35; updated members run the template already.
func newDowngradeCluster(t *testing.T, leader int, updated ...int) *fakeCluster {
	c := newFakeCluster(t, 3, leader, updated...)
	c.withImages(t, map[string]string{oldRev: "registry.k8s.io/etcd:3.6.8-0", newRev: "registry.k8s.io/etcd:3.5.35-0"})
	c.etcd.clusterVersion = "3.6.0"
	c.etcd.serverVersions, c.etcd.storageVersions = map[string]string{}, map[string]string{}
	for i := 0; i < 3; i++ {
		c.etcd.serverVersions[planner.PodName("etcd", i)], c.etcd.storageVersions[planner.PodName("etcd", i)] = "3.6.8", "3.6.0"
	}
	for _, u := range updated {
		c.etcd.runsImage(planner.PodName("etcd", u), "registry.k8s.io/etcd:3.5.35-0")
	}
	return c
}

func TestPlanPutsTheDowngradeAPIBeforeTheFirstRestart(t *testing.T) {
	st := func(cluster string, storage string) ClusterState {
		s := healthyState(3, 1)
		s.TemplateImage, s.ClusterVersion = "etcd:3.5.35", cluster
		for i := range s.Members {
			s.Members[i].Image, s.Members[i].ServerVersion, s.Members[i].StorageVersion = "etcd:3.6.8", "3.6.8", storage
		}
		return s
	}
	tests := []struct {
		name      string
		state     ClusterState
		wantFirst StepKind
		wantLine  string
		wantBlock string
		wantSteps int // enable steps
	}{
		{name: "not enabled yet", state: st("3.6.0", "3.6.0"), wantFirst: StepEnableDowngrade, wantSteps: 1,
			wantLine: "etcd 3.6.8 → 3.5.35 (downgrade to 3.5: enable before etcd-2; cluster version 3.6 → 3.5)"},
		{name: "cluster version unknown", state: st("", "3.6.0"), wantFirst: StepEnableDowngrade, wantSteps: 1,
			wantLine: "etcd 3.6.8 → 3.5.35 (downgrade to 3.5: enable before etcd-2; cluster version unknown → 3.5)"},
		{name: "enabled by an earlier run", state: st("3.5.0", "3.5.0"), wantFirst: StepLowerPartition,
			wantLine: "etcd 3.6.8 → 3.5.35 (downgrade to 3.5: enabled; cluster version 3.5)"},
		{name: "enabled, storage version not lowered yet", state: st("3.5.0", "3.6.0"), wantBlock: "etcd-2 still reports storage version 3.6.0"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p, err := PlanRollout(tt.state, LeaderLazy)
			if tt.wantBlock != "" {
				require.ErrorIs(t, err, ErrBlocked)
				assert.Contains(t, err.Error(), tt.wantBlock)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tt.wantFirst, p.Steps[0].Kind)
			enables := 0
			for _, s := range p.Steps {
				if s.Kind == StepEnableDowngrade {
					enables++
					assert.Equal(t, "3.5", s.Version)
				}
			}
			assert.Equal(t, tt.wantSteps, enables)
			assert.Equal(t, tt.wantLine, p.VersionLine())
			p.Downgrade.Validated = true
			if !p.Downgrade.Enabled {
				assert.Contains(t, p.VersionLine(), "downgrade to 3.5: validate ok; enable before etcd-2")
			}
		})
	}
}

// A 3.6 → 3.5 roll validates and enables etcd's downgrade before the first restart, waits for the storage
// versions to come down, rolls every member and ends with every member on 3.5 and the cluster version 3.5.
func TestRunDowngradesThroughEtcdsDowngradeAPI(t *testing.T) {
	c := newDowngradeCluster(t, 1)
	c.etcd.storageLagsDowngrade = 3
	var said []Event
	res, err := c.engine(t, func(_ *Config, o *Options) { o.OnEvent = func(ev Event) { said = append(said, ev) } }).Run(context.Background())
	require.NoError(t, err)
	assert.Equal(t, []string{"validate 3.5", "enable 3.5", "cancel 3.5"}, c.etcd.downgradeCalls, "the job ended once every member runs 3.5")
	assert.Equal(t, []string{"etcd-2", "etcd-1", "etcd-0"}, res.MembersRolled)
	assert.Equal(t, "3.5.0", res.ClusterVersion)
	assert.Zero(t, res.UnplannedElections)
	ready := slices.IndexFunc(said, func(ev Event) bool { return ev.Kind == EventDowngradeReady && ev.Step.Version == "3.5" })
	firstRestart := slices.IndexFunc(said, func(ev Event) bool { return ev.Kind == EventMemberRestarting })
	require.GreaterOrEqual(t, ready, 0, "etcd's downgrade enabled and waited for")
	assert.Less(t, ready, firstRestart, "enabled, and the storage versions waited for, before the first restart")
	assert.Equal(t, 1, c.eventReasons()[ReasonDowngradeEnabled])
}

// A run that finds the downgrade enabled and a member already on 3.5 (an earlier run stopped after it) goes on
// without asking etcd's downgrade API again.
func TestRunResumesAnEnabledDowngrade(t *testing.T) {
	c := newDowngradeCluster(t, 1, 2)
	_, err := c.etcd.Downgrade(context.Background(), "etcd-1", member.DowngradeEnable, "3.5")
	require.NoError(t, err)
	c.etcd.downgradeCalls = nil
	res, err := c.engine(t, nil).Run(context.Background())
	require.NoError(t, err)
	assert.Equal(t, []string{"cancel 3.5"}, c.etcd.downgradeCalls, "not enabled again; the job ended at the end")
	assert.Equal(t, []string{"etcd-1", "etcd-0"}, res.MembersRolled)
	assert.Equal(t, "3.5.0", res.ClusterVersion)
}

func TestRunDowngradeRefusedByEtcdTouchesNothing(t *testing.T) {
	c := newDowngradeCluster(t, 2)
	c.etcd.downgradeRefused = "etcdserver: invalid downgrade target version"
	res, err := c.engine(t, nil).Run(context.Background())
	require.ErrorIs(t, err, ErrVersionPath)
	assert.Contains(t, err.Error(), "etcd refused `downgrade validate 3.5`")
	assert.Contains(t, err.Error(), "invalid downgrade target version")
	assert.Equal(t, []string{"validate 3.5"}, c.etcd.downgradeCalls)
	assert.Empty(t, res.MembersRolled)
	assert.Zero(t, res.LeaderTransfers, "the leader on etcd-2 was not moved")
	assert.Equal(t, []string{oldRev, oldRev, oldRev}, c.revisions())
}

// A run that enabled the downgrade and stops before any member restarted cancels it, whatever stopped it: the
// storage versions never coming down within the health timeout, the caller giving up. After a member restarted it leaves the downgrade enabled and says the next run resumes it.
func TestRunCancelsTheDowngradeItEnabledWhenItStopsBeforeARestart(t *testing.T) {
	tests := []struct {
		name    string
		setup   func(c *fakeCluster)
		cancel  bool
		wantErr string
	}{
		{name: "storage version never lowered", setup: func(c *fakeCluster) { c.etcd.storageLagsDowngrade = 1 << 30 },
			wantErr: "reports storage version 3.6.0"},
		{name: "cancelled by the caller", setup: func(c *fakeCluster) { c.etcd.storageLagsDowngrade = 1 << 30 }, cancel: true,
			wantErr: "stopped by the caller"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := newDowngradeCluster(t, 1)
			tt.setup(c)
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			var e *Engine
			e = c.engine(t, func(cfg *Config, o *Options) {
				cfg.HealthTimeout = 200 * time.Millisecond
				o.OnEvent = func(ev Event) {
					if tt.cancel && ev.Step.Kind == StepEnableDowngrade { // about to enable it
						cancel()
					}
				}
			})
			res, err := e.Run(ctx)
			require.Error(t, err)
			assert.Contains(t, err.Error(), tt.wantErr)
			assert.Contains(t, err.Error(), "etcd's downgrade to 3.5 was cancelled, since no member had restarted: the cluster version is back to 3.6.0")
			assert.Equal(t, "cancel 3.5", c.etcd.downgradeCalls[len(c.etcd.downgradeCalls)-1])
			assert.Empty(t, res.MembersRolled)
			assert.Equal(t, []string{oldRev, oldRev, oldRev}, c.revisions())
			assert.Equal(t, 1, c.eventReasons()[ReasonDowngradeCancelled])
		})
	}
}

func TestRunLeavesTheDowngradeEnabledOnceAMemberRestarted(t *testing.T) {
	c := newDowngradeCluster(t, 1)
	c.etcd.brokenAfterRestart["etcd-2"] = true
	res, err := c.engine(t, func(cfg *Config, _ *Options) {
		cfg.OnFailure = FailureStop
		cfg.ReadyTimeout, cfg.HealthTimeout = 300*time.Millisecond, 300*time.Millisecond
	}).Run(context.Background())
	require.Error(t, err)
	assert.Contains(t, err.Error(), "etcd's downgrade to 3.5 stays enabled")
	assert.Equal(t, []string{"validate 3.5", "enable 3.5"}, c.etcd.downgradeCalls, "not cancelled")
	assert.Empty(t, res.MembersRolled)
}

// Engine.Plan (the CLI's plan) asks etcd to validate a downgrade it would enable, and changes nothing.
func TestPlanOfADowngradeAsksEtcdToValidateIt(t *testing.T) {
	c := newDowngradeCluster(t, 1)
	_, plan, err := c.engine(t, nil).Plan(context.Background())
	require.NoError(t, err)
	assert.Contains(t, plan.VersionLine(), "downgrade to 3.5: validate ok; enable before etcd-2")
	assert.Equal(t, []string{"validate 3.5"}, c.etcd.downgradeCalls)

	c.etcd.downgradeRefused = "etcdserver: cluster has a member that cannot be downgraded"
	_, _, err = c.engine(t, nil).Plan(context.Background())
	require.ErrorIs(t, err, ErrVersionPath)
	assert.Zero(t, c.stsPatches())
}

// A downgrade call that meets a broken connection is sent again on a new one, and an enable whose answer was
// lost counts as done when the members report the downgrade enabled: neither is etcd refusing.
func TestDowngradeCallsSurviveBrokenConnections(t *testing.T) {
	for _, tt := range []struct {
		name  string
		setup func(f *fakeEtcd)
		calls []string
	}{
		{name: "validate meets a closed connection twice", setup: func(f *fakeEtcd) { f.downgradeBroken = 2 },
			calls: []string{"validate 3.5", "validate 3.5", "validate 3.5", "enable 3.5", "cancel 3.5"}},
		{name: "validate's port-forward ends under it", setup: func(f *fakeEtcd) {
			f.downgradeBroken = 1
			f.downgradeBrokenBy = fmt.Errorf("downgrade validate 3.5 through etcd-2: %w (%v)", member.ErrForwardEnded, context.Canceled)
		}, calls: []string{"validate 3.5", "validate 3.5", "enable 3.5", "cancel 3.5"}},
		{name: "enable answer lost", setup: func(f *fakeEtcd) { f.downgradeEnableAnswerLost = true },
			calls: []string{"validate 3.5", "enable 3.5", "enable 3.5", "enable 3.5", "cancel 3.5"}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			c := newDowngradeCluster(t, 1)
			tt.setup(c.etcd)
			res, err := c.engine(t, nil).Run(context.Background())
			require.NoError(t, err)
			assert.Equal(t, tt.calls, c.etcd.downgradeCalls)
			assert.Equal(t, []string{"etcd-2", "etcd-1", "etcd-0"}, res.MembersRolled)
			assert.Equal(t, "3.5.0", res.ClusterVersion)
		})
	}
}

// An upgrade that finds a downgrade job some earlier downgrade left on (the members on the new minor report
// it) ends it: left on, it would hold the cluster version at the old minor for good.
func TestUpgradeEndsADowngradeJobLeftOn(t *testing.T) {
	c := newFakeCluster(t, 3, 1)
	c.withImages(t, map[string]string{oldRev: "registry.k8s.io/etcd:3.5.35-0", newRev: "registry.k8s.io/etcd:3.6.8-0"})
	c.etcd.clusterVersion, c.etcd.clusterVersionOnceAllRestarted = "3.5.0", "3.6.0"
	c.etcd.serverVersions, c.etcd.storageVersions = map[string]string{}, map[string]string{}
	c.etcd.downgradeTargets = map[string]string{}
	for i := 0; i < 3; i++ {
		c.etcd.serverVersions[planner.PodName("etcd", i)] = "3.5.35"
		c.etcd.downgradeTargets[planner.PodName("etcd", i)] = "3.5.0" // what each reports once it runs 3.6
	}
	res, err := c.engine(t, nil).Run(context.Background())
	require.NoError(t, err)
	assert.Equal(t, []string{"cancel 3.5"}, c.etcd.downgradeCalls)
	assert.Equal(t, "3.6.0", res.ClusterVersion)
}

// A downgrade an earlier run left enabled (its cancel failed) holds the cluster version at the target. A run
// whose template is back on the newer minor, with nothing to roll, cancels it and reports the cluster
// version raised again; one whose cancel fails says so and is not complete.
func TestRunEndsADowngradeAnEarlierRunLeftEnabled(t *testing.T) {
	for _, tt := range []struct {
		name        string
		cancelFails bool
		wantErr     string
	}{
		{name: "cancelled"},
		{name: "the cancel fails", cancelFails: true,
			wantErr: "etcd's downgrade to 3.5.0 is still enabled (an earlier run left it on; it holds the cluster version at 3.5.0) and cancelling it through etcd-1 failed"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			c := newFakeCluster(t, 3, 1, 0, 1, 2)
			c.withImages(t, map[string]string{oldRev: "registry.k8s.io/etcd:3.6.8-0", newRev: "registry.k8s.io/etcd:3.6.8-0"})
			c.promoteNow(t)
			c.etcd.clusterVersion = "3.6.0"
			c.etcd.serverVersions = map[string]string{"etcd-0": "3.6.8", "etcd-1": "3.6.8", "etcd-2": "3.6.8"}
			_, err := c.etcd.Downgrade(context.Background(), "etcd-1", member.DowngradeEnable, "3.5")
			require.NoError(t, err)
			c.etcd.downgradeCalls = nil
			if tt.cancelFails {
				c.etcd.downgradeBroken = downgradeAttempts
			}
			res, err := c.engine(t, nil).Run(context.Background())
			assert.Empty(t, res.MembersRolled, "nothing to roll")
			if tt.wantErr != "" {
				require.ErrorContains(t, err, tt.wantErr)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, []string{"cancel 3.5.0"}, c.etcd.downgradeCalls)
			assert.Equal(t, "3.6.0", res.ClusterVersion, "the cluster version is raised again")
			assert.Equal(t, 1, c.eventReasons()[ReasonDowngradeCancelled])
		})
	}
}

// promoteNow makes the update revision current, as the controller does once every pod runs it and is Ready.
func (c *fakeCluster) promoteNow(t *testing.T) {
	obj, err := c.kube.Tracker().Get(stsGVR, "db", "etcd")
	require.NoError(t, err)
	sts := obj.(*appsv1.StatefulSet).DeepCopy()
	sts.Status.CurrentRevision = sts.Status.UpdateRevision
	require.NoError(t, c.kube.Tracker().Update(stsGVR, sts, "db"))
}
