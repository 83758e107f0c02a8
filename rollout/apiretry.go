package rollout

import (
	"context"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
)

// apiRetryFor is how long a Kubernetes API call is retried while the API server is unreachable or
// overloaded: long enough to ride out an API server restart, short enough to fail while a person waits.
const apiRetryFor = 30 * time.Second

// withAPIRetry runs call until it succeeds, fails with an error that retrying cannot fix (not found,
// forbidden, invalid, conflict), ctx ends, or apiRetryFor passes; it returns the last error.
func withAPIRetry(ctx context.Context, call func(context.Context) error) error {
	deadline := time.Now().Add(apiRetryFor)
	wait := 200 * time.Millisecond
	for {
		err := call(ctx)
		if err == nil || permanent(err) || ctx.Err() != nil || time.Now().After(deadline) {
			return err
		}
		select {
		case <-ctx.Done():
			return err
		case <-time.After(wait):
		}
		if wait < 2*time.Second {
			wait *= 2
		}
	}
}

func permanent(err error) bool {
	return apierrors.IsNotFound(err) || apierrors.IsForbidden(err) || apierrors.IsUnauthorized(err) ||
		apierrors.IsInvalid(err) || apierrors.IsConflict(err) || apierrors.IsBadRequest(err) ||
		apierrors.IsMethodNotSupported(err) || apierrors.IsAlreadyExists(err)
}
