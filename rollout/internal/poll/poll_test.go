package poll

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
)

func TestUntilReturnsWhatItLastSaw(t *testing.T) {
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
		{name: "the deadline passes", ctx: context.Background(), deadline: 30 * time.Millisecond, wantErr: ErrWaitedOut},
		{name: "ctx ended: one look, then its cause", ctx: cancelled, wantSeen: 1, wantErr: context.Canceled},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var deadline time.Time
			if tt.deadline > 0 {
				deadline = time.Now().Add(tt.deadline)
			}
			looks := 0
			seen, err := Until(tt.ctx, deadline, Every(time.Millisecond), func(context.Context) (int, bool, error) {
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

func TestUntilReportsCancellationOverItsDeadline(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	_, err := Until(ctx, time.Now().Add(-time.Second), Every(time.Millisecond), func(context.Context) (int, bool, error) {
		cancel()
		return 0, false, nil
	})
	assert.ErrorIs(t, err, context.Canceled)
}
