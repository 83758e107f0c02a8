package rollout

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
)

func TestWaitForReturnsWhatItLastSaw(t *testing.T) {
	boom := errors.New("boom")
	cancelled, cancel := context.WithCancel(context.Background())
	cancel()
	tests := []struct {
		name     string
		ctx      context.Context
		deadline time.Duration // from now; 0: none
		doneAt   int           // the look that says done; 0: never
		failAt   int           // the look that fails; 0: never
		wantSeen int
		wantErr  error
	}{
		{name: "done at once", ctx: context.Background(), doneAt: 1, wantSeen: 1},
		{name: "done on the third look", ctx: context.Background(), doneAt: 3, wantSeen: 3},
		{name: "a look that fails ends the wait", ctx: context.Background(), failAt: 2, wantSeen: 2, wantErr: boom},
		{name: "the deadline passes", ctx: context.Background(), deadline: 30 * time.Millisecond, wantErr: errWaitedOut},
		{name: "ctx ended: one look, then its cause", ctx: cancelled, wantSeen: 1, wantErr: context.Canceled},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var deadline time.Time
			if tt.deadline > 0 {
				deadline = time.Now().Add(tt.deadline)
			}
			looks := 0
			seen, err := waitFor(tt.ctx, deadline, every(time.Millisecond), func(context.Context) (int, bool, error) {
				looks++
				if looks == tt.failAt {
					return looks, false, boom
				}
				return looks, looks == tt.doneAt, nil
			})
			assert.ErrorIs(t, err, tt.wantErr)
			if tt.wantErr == nil {
				assert.NoError(t, err)
			}
			if tt.wantSeen > 0 {
				assert.Equal(t, tt.wantSeen, seen)
			} else {
				assert.Equal(t, looks, seen, "the last look's value")
			}
		})
	}
}

// The API retry starts quick for a blip and settles at 2 s while an API server restarts, never below it.
func TestAPIBackoffGrowsToItsCap(t *testing.T) {
	next := apiBackoff.DelayFunc()
	var got []time.Duration
	for range 7 {
		got = append(got, next())
	}
	ms := time.Millisecond
	assert.Equal(t, []time.Duration{200 * ms, 400 * ms, 800 * ms, 1600 * ms, 2000 * ms, 2000 * ms, 2000 * ms}, got)
}

func TestWaitForReportsCancellationOverItsDeadline(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	_, err := waitFor(ctx, time.Now().Add(-time.Second), every(time.Millisecond), func(context.Context) (int, bool, error) {
		cancel()
		return 0, false, nil
	})
	assert.ErrorIs(t, err, context.Canceled)
}
