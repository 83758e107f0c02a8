package outage

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// A meter fed reads at given offsets (ms) and outcomes reports the longest stretch between two successful
// reads with a failed one inside, or the stretch still open when it stops.
func TestMeterMeasuresTheLongestStretchWithoutASuccessfulRead(t *testing.T) {
	t0 := time.Date(2026, 12, 5, 0, 0, 0, 0, time.UTC)
	at := func(ms int) time.Time { return t0.Add(time.Duration(ms) * time.Millisecond) }
	type read struct {
		ms int
		ok bool
	}
	tests := []struct {
		name                string
		reads               []read
		stopAt              int
		back                bool
		lastBefore, firstAt int
		outage              time.Duration
		failed              int
	}{
		{name: "one outage", reads: []read{{0, true}, {50, true}, {100, false}, {150, false}, {1200, true}, {1250, true}},
			stopAt: 1300, back: true, lastBefore: 50, firstAt: 1200, outage: 1150 * time.Millisecond, failed: 2},
		{name: "the longest of two", reads: []read{{0, true}, {50, false}, {100, true}, {150, false}, {900, true}},
			stopAt: 1000, back: true, lastBefore: 100, firstAt: 900, outage: 800 * time.Millisecond, failed: 2},
		{name: "a slow success without a failure is no outage", reads: []read{{0, true}, {700, true}, {750, false}, {800, true}},
			stopAt: 850, back: true, lastBefore: 700, firstAt: 800, outage: 100 * time.Millisecond, failed: 1},
		{name: "never back: the outage so far", reads: []read{{0, true}, {50, true}, {100, false}, {150, false}},
			stopAt: 2050, back: false, lastBefore: 50, outage: 2 * time.Second, failed: 2},
		{name: "back once, then gone for longer", reads: []read{{0, true}, {50, false}, {100, true}, {150, false}},
			stopAt: 3100, back: false, lastBefore: 100, outage: 3 * time.Second, failed: 2},
		{name: "back once, then gone for less", reads: []read{{0, true}, {50, false}, {2000, true}, {2050, false}},
			stopAt: 2100, back: true, lastBefore: 0, firstAt: 2000, outage: 2 * time.Second, failed: 2},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			now := at(tc.stopAt)
			m := &Meter{every: 50 * time.Millisecond, now: func() time.Time { return now }, done: make(chan struct{}), cancel: func() {}}
			for _, r := range tc.reads {
				m.record(at(r.ms), r.ok)
			}
			got := m.Stop()
			assert.Equal(t, tc.back, got.Back)
			assert.Equal(t, at(tc.lastBefore), got.LastBefore)
			if tc.back {
				assert.Equal(t, at(tc.firstAt), got.FirstAfter)
			} else {
				assert.True(t, got.FirstAfter.IsZero())
			}
			assert.Equal(t, tc.outage, got.Outage)
			assert.Equal(t, len(tc.reads), got.Reads)
			assert.Equal(t, tc.failed, got.Failed)
		})
	}
}

// Start refuses a member that does not answer its first read: an outage is measured from one that did.
func TestStartNeedsAFirstSuccessfulRead(t *testing.T) {
	_, err := Start(context.Background(), func(context.Context) error { return errors.New("refused") }, 10*time.Millisecond, time.Second)
	require.Error(t, err)
}

// Live: a read that fails for a while is measured to within the interval.
func TestMeterOverLiveReads(t *testing.T) {
	var down atomic.Bool
	read := func(context.Context) error {
		if down.Load() {
			return errors.New("down")
		}
		return nil
	}
	m, err := Start(context.Background(), read, 5*time.Millisecond, time.Second)
	require.NoError(t, err)
	down.Store(true)
	m.Down()
	time.Sleep(100 * time.Millisecond)
	m.Watch(context.Background())
	time.Sleep(100 * time.Millisecond)
	down.Store(false)
	time.Sleep(30 * time.Millisecond)
	got := m.Stop()
	require.True(t, got.Back)
	assert.GreaterOrEqual(t, got.Outage, 200*time.Millisecond)
	assert.Less(t, got.Outage, 2*time.Second)
	assert.Positive(t, got.Failed)
}

// Down with no Watch yet reports the outage so far at Stop; a member that answers its first watched read ends
// it, though no read failed between (the meter sends none while the pod stops).
func TestDownThenAnAnsweredWatchEndsTheOutage(t *testing.T) {
	m, err := Start(context.Background(), func(context.Context) error { return nil }, 5*time.Millisecond, time.Second)
	require.NoError(t, err)
	m.Down()
	time.Sleep(50 * time.Millisecond)
	m.Watch(context.Background())
	time.Sleep(30 * time.Millisecond)
	got := m.Stop()
	require.True(t, got.Back)
	assert.GreaterOrEqual(t, got.Outage, 50*time.Millisecond)
	assert.Zero(t, got.Failed, "Down is no read")

	m, err = Start(context.Background(), func(context.Context) error { return nil }, 5*time.Millisecond, time.Second)
	require.NoError(t, err)
	m.Down()
	time.Sleep(20 * time.Millisecond)
	got = m.Stop()
	assert.False(t, got.Back)
	assert.GreaterOrEqual(t, got.Outage, 20*time.Millisecond)
}
