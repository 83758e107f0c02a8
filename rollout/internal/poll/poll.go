// Package poll is the engine's one way to wait for something it must look at again and again: a look, a
// pause, and another look, until the look says done, fails, the context ends or a deadline passes. Waits
// differ only in the pause (a fixed interval, a growing one, a watch event), so they share Until.
package poll

import (
	"context"
	"errors"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"
)

// ErrWaitedOut is Until's answer when its deadline passed before the look said done.
var ErrWaitedOut = errors.New("waited out")

// Pause is how a wait spends the time between two looks: it returns when the next look is due, or with ctx's
// cause.
type Pause func(ctx context.Context) error

// Every pauses d between looks.
func Every(d time.Duration) Pause {
	return func(ctx context.Context) error { return Sleep(ctx, d) }
}

// BackingOff pauses as b steps: for calls that fail while something recovers (an API server restarting),
// where a fixed short interval would add load and a fixed long one would add delay.
func BackingOff(b wait.Backoff) Pause {
	next := b.DelayFunc()
	return func(ctx context.Context) error { return Sleep(ctx, next()) }
}

// Until looks at once, then after each pause, until the look says done or fails, ctx ends, or deadline
// passes (a zero deadline sets no limit). It returns what the last look saw, with nil when done, the look's
// own error, ctx's cause, or ErrWaitedOut, so that the caller can say what it waited for and what it saw
// instead. An ended ctx wins over a passed deadline: a cancelled run reports its cancellation, not a timeout.
func Until[T any](ctx context.Context, deadline time.Time, between Pause, look func(context.Context) (T, bool, error)) (T, error) {
	for {
		seen, done, err := look(ctx)
		if done || err != nil {
			return seen, err
		}
		if err := context.Cause(ctx); err != nil {
			return seen, err
		}
		if !deadline.IsZero() && time.Now().After(deadline) {
			return seen, ErrWaitedOut
		}
		if err := between(ctx); err != nil {
			return seen, err
		}
	}
}

// Sleep waits d, or returns ctx's cause when ctx ends first.
func Sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return context.Cause(ctx)
	case <-t.C:
		return nil
	}
}
