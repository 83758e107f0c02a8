// Package kubeapi is how the engine calls the Kubernetes API: retried while the API server is away
// (WithRetry), within client-side rate limits of its own (WithRateLimits), and counted (Counter), which make
// bench and a run's result report.
package kubeapi

import (
	"context"
	"errors"
	"fmt"
	"math"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/etcd-rollout/pulumi-etcd-rollout/rollout/internal/poll"
)

// RetryFor is how long a Kubernetes API call is retried while the API server is unreachable or overloaded:
// long enough to ride out an API server restart, short enough to fail while a person waits.
const RetryFor = 30 * time.Second

// Backoff paces WithRetry: quick at first, for a blip, then every 2 s while an API server restarts.
var Backoff = wait.Backoff{Duration: 200 * time.Millisecond, Factor: 2, Cap: 2 * time.Second, Steps: math.MaxInt32}

// WithRetry runs call until it succeeds, fails with an error that retrying cannot fix (Permanent), ctx ends,
// or RetryFor passes; it returns the last error.
func WithRetry(ctx context.Context, call func(context.Context) error) error {
	lastErr, err := poll.Until(ctx, time.Now().Add(RetryFor), poll.BackingOff(Backoff), func(ctx context.Context) (error, bool, error) {
		err := call(ctx)
		if err != nil && Permanent(err) {
			return err, false, err
		}
		return err, err == nil, nil
	})
	switch {
	case lastErr == nil:
		return err
	case err != nil && ctx.Err() != nil && !errors.Is(lastErr, err):
		// What the API server said, and that the caller's context ended the retries: a run cancelled while
		// its write was refused must read as cancelled (CI at a206277: a Ctrl-C during a lock read as an API
		// failure, and the run's report said so).
		return fmt.Errorf("%w; stopped retrying: %w", lastErr, err)
	}
	return lastErr // what the API server said, not that the retries ran out
}

// Permanent says err is an answer retrying cannot change: not found, forbidden, unauthorized, invalid, a
// conflict, a bad request, a method not supported, already there.
func Permanent(err error) bool {
	return apierrors.IsNotFound(err) || apierrors.IsForbidden(err) || apierrors.IsUnauthorized(err) ||
		apierrors.IsInvalid(err) || apierrors.IsConflict(err) || apierrors.IsBadRequest(err) ||
		apierrors.IsMethodNotSupported(err) || apierrors.IsAlreadyExists(err)
}
