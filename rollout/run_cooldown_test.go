package rollout

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// A member that passed is failed only on its own failure or a restart, never on a look that did not reach
// it (an API server restart ends every port-forward); one that cannot be reached for a whole health timeout
// stops the run without a revert, as it may be healthy.
func TestMembersThatPassedAreFailedOnlyForWhatTheyDid(t *testing.T) {
	tests := []struct {
		name     string
		cooldown time.Duration
		// at is the event on which act runs, once.
		at  string
		act func(c *fakeCluster)
		// noIncarnation: etcd does not name its process.
		noIncarnation bool
		wantErr       string
		wantReverted  bool
		wantSaid      string
	}{
		{
			name: "unreached during the cool-down, then the same process answers", cooldown: 300 * time.Millisecond,
			at: "cooling down", act: unreachableFor(150 * time.Millisecond),
			wantSaid: "etcd-2 answers again from the etcd process that passed (started at 2026-12-03T00:00:20.00Z)",
		},
		{
			name: "unreached when the run looks again before the next member (no cool-down)",
			at:   "etcd-2 rolled in", act: unreachableFor(150 * time.Millisecond),
			wantSaid: "etcd-2 answers again from the etcd process that passed",
		},
		{
			name: "restarted during the cool-down, though every look answered", cooldown: 300 * time.Millisecond,
			at: "cooling down", act: func(c *fakeCluster) { c.etcd.restartQuietly("etcd-2") },
			wantErr: "restarted during the cool-down (etcd process started at 2026-12-03T00:00:30.00Z, the one that passed at 2026-12-03T00:00:20.00Z)", wantReverted: true,
		},
		{
			// The fresh-clone CI: one etcd process read as started at 00:22:56.95 and then 00:22:57.95.
			name: "its process start is read a second late during the cool-down", cooldown: 300 * time.Millisecond,
			at: "cooling down", act: func(c *fakeCluster) { c.etcd.jitterStarts() },
		},
		{
			name: "unreached for the whole health timeout", cooldown: 300 * time.Millisecond,
			at: "cooling down", act: func(c *fakeCluster) { c.etcd.setUnseen("etcd-2", true) },
			wantErr: "could not look at a member: etcd-2, for 500ms",
		},
		{
			// Without a process name the failed looks count, but its peers say it still votes: unknown, not failed.
			name: "unreached, and etcd does not name its process", cooldown: 300 * time.Millisecond, noIncarnation: true,
			at: "cooling down", act: func(c *fakeCluster) { c.etcd.setUnseen("etcd-2", true) },
			wantErr: "etcd-2 stopped answering us (the look did not reach etcd: port-forward to db/etcd-2: the API server is away, during the cool-down), but etcd-0 reports it as a connected Raft peer",
		},
		{
			// The kubelet restarted its container: it did not stay up, whatever the path to it does.
			name: "unreached during the cool-down, and its container restarted", cooldown: 300 * time.Millisecond,
			at: "cooling down", act: restartedUnseen,
			wantErr: "port-forward to db/etcd-2: the API server is away; and its container restarted (1 restarts, 0 before)", wantReverted: true,
		},
		{
			name: "unreached, etcd does not name its process, and its container restarted", cooldown: 300 * time.Millisecond, noIncarnation: true,
			at: "cooling down", act: restartedUnseen,
			wantErr: "etcd-2 passed the etcd health gate", wantReverted: true,
		},
		{
			name: "unreached, etcd does not name its process, and it is down to its peers too", cooldown: 300 * time.Millisecond, noIncarnation: true,
			at: "cooling down", act: func(c *fakeCluster) { c.etcd.setUnseen("etcd-2", true); c.etcd.stop("etcd-2") },
			wantErr: "etcd-2 passed the etcd health gate", wantReverted: true,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := newFakeCluster(t, 3, 1)
			c.etcd.noIncarnation = tt.noIncarnation
			var said []string
			var once sync.Once
			res, err := c.engine(t, func(cfg *Config, o *Options) {
				cfg.Cooldown, cfg.HealthTimeout, cfg.OnFailure = tt.cooldown, 500*time.Millisecond, FailureStop
				o.OnEvent = func(ev Event) {
					said = append(said, ev.Message)
					if strings.HasPrefix(ev.Message, tt.at) {
						once.Do(func() { tt.act(c) })
					}
				}
			}).Run(context.Background())
			if tt.wantErr == "" {
				require.NoError(t, err)
				assert.Equal(t, []string{"etcd-2", "etcd-1", "etcd-0"}, res.MembersRolled)
				assert.Contains(t, strings.Join(said, "\n"), tt.wantSaid)
				return
			}
			require.Error(t, err)
			assert.Contains(t, err.Error(), tt.wantErr)
			var gate *GateTimeoutError
			assert.Equal(t, tt.wantReverted, errors.As(err, &gate), "failed as the member's own failure (what onFailure: revert reverts)")
			assert.Equal(t, !tt.wantReverted, errors.Is(err, ErrMemberUnseen))
			assert.Equal(t, []string{oldRev, oldRev, newRev}, c.revisions(), "no other member was restarted")
			if tt.wantReverted {
				assert.Empty(t, res.MembersRolled, "a member that did not stay up is not reported rolled")
			} else {
				assert.Equal(t, []string{"etcd-2"}, res.MembersRolled, "a member that may be healthy stays reported")
			}
			assert.Equal(t, 3, c.partition(), "the partition is locked")
		})
	}
}

// restartedUnseen is a crash of etcd-2 as the kubelet reports it (its container's restart count rises, given
// the engine's pod watch a moment to deliver it) after which no look reaches it.
func restartedUnseen(c *fakeCluster) {
	c.containerRestarted("etcd-2")
	time.Sleep(50 * time.Millisecond)
	c.etcd.setUnseen("etcd-2", true)
}

// unreachableFor makes no look reach etcd-2 for d, while it runs on.
func unreachableFor(d time.Duration) func(*fakeCluster) {
	return func(c *fakeCluster) {
		c.etcd.setUnseen("etcd-2", true)
		time.AfterFunc(d, func() { c.etcd.setUnseen("etcd-2", false) })
	}
}

// With no cool-down, the members that passed are still checked against the etcd process that passed before the
// next member is disrupted: a member that restarted since it passed stops the run there (issue 31's audit: with
// the check skipped at cool-down 0, only the schedule checker caught it). Five members, so that the fresh
// look's quorum rule alone would not stop the next restart.
func TestWithoutACoolDownAPassedMemberIsCheckedBeforeTheNext(t *testing.T) {
	c := newFakeCluster(t, 5, 0)
	restarted := false
	_, err := c.engine(t, func(cfg *Config, o *Options) {
		cfg.Cooldown = 0
		o.OnEvent = func(ev Event) {
			if ev.Kind == EventMemberRolled && ev.Pod == "etcd-4" && !restarted {
				restarted = true
				c.etcd.restartQuietly("etcd-4") // a slow crash loop: it restarted after it passed, and answers
			}
		}
	}).Run(context.Background())

	require.True(t, restarted)

	var gate *GateTimeoutError
	require.ErrorAs(t, err, &gate)
	assert.Equal(t, "etcd-4", gate.Pod)
	assert.NotContains(t, c.restarted, "etcd-3", "nothing else is disrupted after etcd-4 did not stay up")
}
