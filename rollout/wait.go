package rollout

import (
	"context"
	"errors"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"
)

// errWaitedOut is waitFor's answer when its deadline passed before the look said done.
var errWaitedOut = errors.New("waited out")

// pause is how a wait spends the time between two looks: it returns when the next look is due, or with ctx's
// cause. Waits differ only in this (a fixed interval, a growing one, a watch event), so they share waitFor.
type pause func(ctx context.Context) error

// every pauses d between looks.
func every(d time.Duration) pause {
	return func(ctx context.Context) error { return sleep(ctx, d) }
}

// backingOff pauses as b steps: for calls that fail while something recovers (an API server restarting),
// where a fixed short interval would add load and a fixed long one would add delay.
func backingOff(b wait.Backoff) pause {
	next := b.DelayFunc()
	return func(ctx context.Context) error { return sleep(ctx, next()) }
}

// waitFor is the engine's one way to wait for something it must look at again and again: it looks at once,
// then after each pause, until the look says done or fails, ctx ends, or deadline passes (a zero deadline
// sets no limit). It returns what the last look saw, with nil when done, the look's own error, ctx's cause,
// or errWaitedOut, so that the caller can say what it waited for and what it saw instead. An ended ctx wins
// over a passed deadline: a cancelled run reports its cancellation, not a timeout.
func waitFor[T any](ctx context.Context, deadline time.Time, between pause, look func(context.Context) (T, bool, error)) (T, error) {
	for {
		seen, done, err := look(ctx)
		if done || err != nil {
			return seen, err
		}
		if err := context.Cause(ctx); err != nil {
			return seen, err
		}
		if !deadline.IsZero() && time.Now().After(deadline) {
			return seen, errWaitedOut
		}
		if err := between(ctx); err != nil {
			return seen, err
		}
	}
}
