package rollout

import (
	"context"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/etcd-rollout/pulumi-etcd-rollout/rollout/internal/planner"
)

// The engine takes a snapshot from the leader only, and refuses before asking anyone when the destination is
// bad or no healthy leader can vouch for it. Its success against real etcd is in tests/engine.
func TestASnapshotComesFromTheLeaderOrNotAtAll(t *testing.T) {
	for _, tc := range []struct {
		name      string
		dest      func(dir string) string
		setup     func(c *fakeCluster)
		wantErr   error
		wantText  string
		wantAsked []string
	}{
		{name: "a stream that fails its check is not stored", dest: func(dir string) string { return dir },
			setup:   func(c *fakeCluster) { c.etcd.snapshot = make([]byte, 4096+32) },
			wantErr: ErrSnapshotCorrupt, wantText: "does not match the sha256", wantAsked: []string{"etcd-1"}},
		{name: "a destination with a credential", dest: func(string) string { return "s3://bucket?aws_secret_access_key=x" },
			wantErr: ErrBadSnapshotDestination, wantText: "looks like a credential"},
		{name: "no healthy leader", dest: func(dir string) string { return dir },
			setup:    func(c *fakeCluster) { c.etcd.down["etcd-1"] = true },
			wantText: "no member is a healthy leader"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := newFakeCluster(t, 3, 1)
			if tc.setup != nil {
				tc.setup(c)
			}
			dir := filepath.Join(t.TempDir(), "backups")
			_, err := c.engine(t, nil).Snapshot(context.Background(), SnapshotOptions{Destination: tc.dest(dir), SpoolDir: t.TempDir()})
			require.Error(t, err)
			if tc.wantErr != nil {
				require.ErrorIs(t, err, tc.wantErr)
			}
			assert.Contains(t, err.Error(), tc.wantText)
			assert.Equal(t, tc.wantAsked, c.etcd.snapshotsFrom, "members asked for a snapshot")
			stored, _ := filepath.Glob(filepath.Join(dir, "db", "etcd", "*"))
			assert.Empty(t, stored, "nothing stored")
		})
	}
}

// minorUpgrade makes c a 3-member 3.5 cluster whose template runs 3.6: a roll past the point of no return.
func minorUpgrade(t *testing.T, c *fakeCluster) {
	c.withImages(t, map[string]string{oldRev: "registry.k8s.io/etcd:3.5.35-0", newRev: "registry.k8s.io/etcd:3.6.8-0"})
	c.etcd.clusterVersion, c.etcd.clusterVersionOnceAllRestarted = "3.5.0", "3.6.0"
	c.etcd.serverVersions, c.etcd.storageVersions = map[string]string{}, map[string]string{}
	for i := 0; i < 3; i++ {
		c.etcd.serverVersions[planner.PodName("etcd", i)] = "3.5.35"
	}
}

// A minor-version change takes a verified snapshot from the leader before its first step, once; a failed one
// stops the run with nothing restarted unless the user said to go on without one; a patch roll takes none.
func TestAMinorChangeTakesASnapshotBeforeItsFirstRestart(t *testing.T) {
	for _, tc := range []struct {
		name        string
		minor       bool
		serve       bool
		proceed     bool
		wantErr     error
		wantStored  bool
		wantSkipped bool
	}{
		{name: "stored first", minor: true, serve: true, wantStored: true},
		{name: "failed: nothing restarted", minor: true, wantErr: ErrNoSnapshot},
		{name: "failed, gone on as allowed", minor: true, proceed: true, wantSkipped: true},
		{name: "a patch roll takes none", serve: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := newFakeCluster(t, 3, 1)
			if tc.minor {
				minorUpgrade(t, c)
			}
			if !tc.serve {
				c.etcd.snapshot = nil
			}
			dir := filepath.Join(t.TempDir(), "backups")
			var kinds []EventKind
			var storedIn time.Duration
			res, err := c.engine(t, func(cfg *Config, o *Options) {
				cfg.SnapshotTo, cfg.ProceedWithoutSnapshot = dir, tc.proceed
				record := eventKindsInto(&kinds)
				o.OnEvent = func(ev Event) {
					record(ev)
					if ev.Kind == EventSnapshotStored {
						storedIn = ev.Elapsed
					}
				}
			}).Run(context.Background())
			if tc.wantErr != nil {
				require.ErrorIs(t, err, tc.wantErr)
				require.ErrorIs(t, err, ErrBlocked)
				assert.Contains(t, err.Error(), "set proceedWithoutSnapshot")
				assert.Empty(t, c.deletedPods())
				assert.Equal(t, 3, c.partition())
				assert.Equal(t, []string{oldRev, oldRev, oldRev}, c.revisions(), "nothing restarted")
				return
			}
			require.NoError(t, err)
			assert.Equal(t, []string{"etcd-2", "etcd-1", "etcd-0"}, res.MembersRolled)
			first := slices.Index(kinds, EventMemberRestarting)
			if tc.wantStored {
				require.NotNil(t, res.Snapshot)
				assert.Equal(t, []string{"etcd-1"}, c.etcd.snapshotsFrom, "once, from the leader")
				assert.Equal(t, "etcd-1", res.Snapshot.Member)
				assert.Less(t, slices.Index(kinds, EventSnapshotStored), first, "stored before the first restart")
				assert.Positive(t, storedIn, "the event says how long the whole snapshot step took")
				assert.FileExists(t, filepath.Join(dir, "db", "etcd", filepath.Base(res.Snapshot.Location)))
			} else {
				assert.Nil(t, res.Snapshot)
			}
			if tc.wantSkipped {
				assert.Contains(t, res.SnapshotSkipped, "connection refused")
				assert.Less(t, slices.Index(kinds, EventSnapshotSkipped), first)
			} else {
				assert.Empty(t, res.SnapshotSkipped)
			}
			if !tc.minor {
				assert.Empty(t, c.etcd.snapshotsFrom, "nobody asked")
			}
		})
	}
}

// The preview says a snapshot comes first, and where it goes.
func TestThePlanOfAMinorChangeSaysTheSnapshotComesFirst(t *testing.T) {
	c := newFakeCluster(t, 3, 1)
	minorUpgrade(t, c)
	_, p, err := c.engine(t, func(cfg *Config, _ *Options) { cfg.SnapshotTo = "s3://rollbacks?region=eu-west-1" }).Plan(context.Background())
	require.NoError(t, err)
	require.NotNil(t, p.Snapshot)
	assert.Contains(t, p.String(), "a verified snapshot of the leader before etcd-2 restarts, to s3://rollbacks?region=eu-west-1")
	assert.Contains(t, p.Detail(), " 0. a verified snapshot of the leader before etcd-2 restarts")
}

func TestASnapshotDestinationWithACredentialIsBadInput(t *testing.T) {
	cfg := NewConfig("etcd", "db", "etcd")
	cfg.SnapshotTo = "s3://k:s@rollbacks"
	err := cfg.Validate()
	require.Error(t, err)
	assert.Contains(t, err.Error(), "snapshotTo: snapshot destination refused: the URL carries user info")
	assert.NotContains(t, err.Error(), "k:s@")
}

// A one-member etcd rolls only with Config.AcceptWriteOutage: then a verified snapshot comes first (required:
// proceedWithoutSnapshot does not waive it), the only member restarts with no leader move, and the run
// reports the measured write outage and the election the restart cost, which is not an unplanned one.
func TestAOneMemberEtcdRollsOnlyWithConsentAndASnapshotFirst(t *testing.T) {
	for _, tc := range []struct {
		name      string
		accept    bool
		serve     bool
		wantErr   error
		wantText  string
		wantRolls bool
	}{
		{name: "refused without consent", serve: true, wantErr: ErrSingleMember, wantText: "accept the write outage (acceptWriteOutage, or --accept-write-outage)"},
		{name: "rolled with consent", accept: true, serve: true, wantRolls: true},
		{name: "no snapshot, no restart, even with proceedWithoutSnapshot", accept: true, wantErr: ErrNoSnapshot,
			wantText: "proceedWithoutSnapshot does not cover a one-member restart"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := newFakeCluster(t, 1, 0)
			if !tc.serve {
				c.etcd.snapshot = nil
			}
			dir := filepath.Join(t.TempDir(), "backups")
			var kinds []EventKind
			res, err := c.engine(t, func(cfg *Config, o *Options) {
				cfg.SnapshotTo, cfg.AcceptWriteOutage, cfg.ProceedWithoutSnapshot = dir, tc.accept, true
				cfg.ReadyTimeout = time.Hour
				o.OnEvent = eventKindsInto(&kinds)
			}).Run(context.Background())
			if tc.wantErr != nil {
				require.ErrorIs(t, err, tc.wantErr)
				require.ErrorIs(t, err, ErrBlocked)
				assert.Contains(t, err.Error(), tc.wantText)
				assert.Empty(t, c.deletedPods())
				assert.Zero(t, c.stsPatches())
				assert.Equal(t, []string{oldRev}, c.revisions(), "nothing restarted")
				assert.Nil(t, res.WriteOutage)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, []string{"etcd-0"}, res.MembersRolled)
			assert.Zero(t, c.etcd.moves, "nobody to move the leader to")
			require.NotNil(t, res.Snapshot)
			assert.Less(t, slices.Index(kinds, EventSnapshotStored), slices.Index(kinds, EventMemberRestarting), "stored before the restart")
			require.NotNil(t, res.WriteOutage)
			o := res.WriteOutage
			assert.Equal(t, "etcd-0", o.Pod)
			assert.True(t, o.Back)
			assert.Positive(t, o.Duration)
			assert.Equal(t, o.FirstReadAfter.Sub(o.LastReadBefore), o.Duration)
			assert.Equal(t, 1, o.Elections, "the only member elects itself when it starts")
			assert.Equal(t, 1, c.etcd.ownElections)
			assert.Zero(t, res.UnplannedElections, "the election the consent accepted is not unplanned")
			assert.False(t, res.ElectionsUnknown)
			assert.Contains(t, res.Summary(), "write outage of etcd-0, the only member (accepted)")
			assert.Contains(t, kinds, EventWriteOutage)
		})
	}
}

// eventKindsInto is an OnEvent that keeps the kinds of every event but progress, in order.
func eventKindsInto(kinds *[]EventKind) func(Event) {
	return func(ev Event) {
		if ev.Kind != EventProgress {
			*kinds = append(*kinds, ev.Kind)
		}
	}
}

// Once a member runs 3.6, etcd's member list must be the one the run began with: a member back from the v2
// store (etcd-io/etcd#20967) stops the run at once, with the partition locked, rather than a hold that counts
// quorum over a member nobody runs (review 3).
func TestAMemberListThatGrowsOnceAMemberRunsTheNewMinorStopsTheRun(t *testing.T) {
	c := newFakeCluster(t, 3, 1)
	minorUpgrade(t, c)
	zombie := false
	res, err := c.engine(t, func(cfg *Config, o *Options) {
		cfg.SnapshotTo = t.TempDir()
		o.OnEvent = func(ev Event) {
			if ev.Kind == EventMemberRolled && !zombie {
				zombie = true
				c.etcd.mu.Lock()
				c.etcd.ids["etcd-zombie"] = 0xdead
				c.etcd.down["etcd-zombie"] = true
				c.etcd.mu.Unlock()
			}
		}
	}).Run(context.Background())
	require.True(t, zombie)
	require.ErrorIs(t, err, ErrMembershipChanged)
	assert.Contains(t, err.Error(), "member dead (etcd-zombie, peer URL https://etcd-zombie.etcd.db.svc:2380) is listed since a member runs etcd 3.6")
	assert.Equal(t, []string{"etcd-2"}, res.MembersRolled, "nothing restarted after the first member")
	assert.Equal(t, 3, c.partition())
}
