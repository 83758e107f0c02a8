package rollout

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The first member on a new revision holds the full stability window (the canary: a crash-looping revision
// shows there); later members on the proven revision pass on etcd's first healthy answer.
func TestOnlyTheFirstMemberOnARevisionHoldsTheStabilityWindow(t *testing.T) {
	c := newFakeCluster(t, 3, 1)
	var said []string
	res, err := c.engine(t, func(_ *Config, o *Options) {
		o.StableFor = 400 * time.Millisecond
		o.OnEvent = func(ev Event) { said = append(said, ev.Message) }
	}).Run(context.Background())
	require.NoError(t, err)
	require.Equal(t, []string{"etcd-2", "etcd-1", "etcd-0"}, res.MembersRolled)
	var windows []string
	for _, m := range said {
		if i := strings.Index(m, "checking etcd health ("); i >= 0 {
			windows = append(windows, m[i:])
		}
	}
	require.Len(t, windows, 3)
	assert.Contains(t, windows[0], "healthy without a break for 400ms")
	assert.Contains(t, windows[1], "one healthy look: "+newRev+" proved itself")
	assert.Contains(t, windows[2], "one healthy look", "one window, not three (what it costs is make bench's to say, not a timed assertion's)")
}

// A crash-looping revision still fails at its first member.
func TestACrashLoopingRevisionNeverBecomesProven(t *testing.T) {
	c := newFakeCluster(t, 3, 1)
	c.etcd.crashLoopAfterRestart["etcd-2"] = true
	c.etcd.crashUp, c.etcd.crashDown = 150*time.Millisecond, 100*time.Millisecond
	e := c.engine(t, func(cfg *Config, o *Options) {
		cfg.HealthTimeout, cfg.OnFailure = 1500*time.Millisecond, FailureStop
		o.StableFor = 400 * time.Millisecond
	})
	_, err := e.Run(context.Background())
	require.Error(t, err)
	assert.False(t, e.proven.Has(newRev))
	assert.Equal(t, []string{oldRev, oldRev, newRev}, c.revisions(), "etcd-1 and etcd-0 were never restarted")
}
