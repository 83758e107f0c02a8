package rollout

import (
	"context"
	"errors"
	"fmt"
	"math"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/util/wait"
)

// apiRetryFor is how long a Kubernetes API call is retried while the API server is unreachable or
// overloaded: long enough to ride out an API server restart, short enough to fail while a person waits.
const apiRetryFor = 30 * time.Second

// apiBackoff paces withAPIRetry: quick at first, for a blip, then every 2 s while an API server restarts.
var apiBackoff = wait.Backoff{Duration: 200 * time.Millisecond, Factor: 2, Cap: 2 * time.Second, Steps: math.MaxInt32}

// withAPIRetry runs call until it succeeds, fails with an error that retrying cannot fix (not found,
// forbidden, invalid, conflict), ctx ends, or apiRetryFor passes; it returns the last error.
func withAPIRetry(ctx context.Context, call func(context.Context) error) error {
	lastErr, err := waitFor(ctx, time.Now().Add(apiRetryFor), backingOff(apiBackoff), func(ctx context.Context) (error, bool, error) {
		err := call(ctx)
		if err != nil && permanent(err) {
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

func permanent(err error) bool {
	return apierrors.IsNotFound(err) || apierrors.IsForbidden(err) || apierrors.IsUnauthorized(err) ||
		apierrors.IsInvalid(err) || apierrors.IsConflict(err) || apierrors.IsBadRequest(err) ||
		apierrors.IsMethodNotSupported(err) || apierrors.IsAlreadyExists(err)
}
