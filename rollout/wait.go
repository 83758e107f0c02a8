package rollout

import (
	"context"
	"errors"
	"time"
)

// errWaitedOut is waitFor's answer when its deadline passed before the look said done.
var errWaitedOut = errors.New("waited out")

// waitFor is the engine's one way to wait for something it must look at again and again: it looks at once,
// then every interval, until the look says done or fails, ctx ends, or deadline passes (a zero deadline sets
// no limit). It returns what the last look saw, with nil when done, the look's own error, ctx's cause, or
// errWaitedOut, so that the caller can say what it waited for and what it saw instead.
func waitFor[T any](ctx context.Context, deadline time.Time, every time.Duration, look func(context.Context) (T, bool, error)) (T, error) {
	for {
		seen, done, err := look(ctx)
		if done || err != nil {
			return seen, err
		}
		if !deadline.IsZero() && time.Now().After(deadline) {
			return seen, errWaitedOut
		}
		if err := sleep(ctx, every); err != nil {
			return seen, err
		}
	}
}
