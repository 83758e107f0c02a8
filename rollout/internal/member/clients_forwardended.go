package member

import (
	"context"
	"errors"
	"fmt"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// ErrForwardEnded is the cause given to a member call whose port-forward ended under it.
var ErrForwardEnded = errors.New("the port-forward to the member ended (client-go ends a whole forward when one of its connections fails, as when the member refuses one right after a restart, until it listens); the next look opens a new one")

// forwardEnded names the ended forward as the reason for err when it was.
func forwardEnded(ctx context.Context, err error) error {
	if err != nil && errors.Is(context.Cause(ctx), ErrForwardEnded) {
		return fmt.Errorf("%w (%v)", ErrForwardEnded, err)
	}
	return err
}

// read runs a read-only call on pod's client, bound to its forward. A forward that never answered and let
// the call wait out its deadline is dropped, so the next look opens a new one: a port-forward can stop
// passing new connections without ending (kwok logged "timed out waiting for streams" 30 s later), and
// reused, it kept an etcd gate waiting its whole minute for a member that served all along (make bench
// ten-clusters). One that answered before is kept: then the member is slow, not the forward.
//
// A forward that ended under the call is not retried, even one that had answered: its end may be the
// member's own (a crash ends every connection to it). Retried at once, a member that restarts quickly
// looked as if it had never broken, and a crash-looping canary passed its stability window
// (TestCrashLoopingRevisionFailsAtTheFirstMember caught it). The end of a forward that had answered is
// marked ErrNoLook instead: the look says nothing either way, and the member's incarnation, read once it
// answers again, tells a transport end (client-go ends a whole forward when any one of its connections
// fails, and an API server restart ends them all) from a restart. The end of a forward that never answered
// stays the member's: it refused the connection. The engine itself opens no connection that could end a
// forward so (memberHTTP).
func (m *Clients) read(ctx context.Context, pod string, call func(context.Context, *memberClient) error) error {
	c, err := m.client(ctx, pod)
	if err != nil {
		return err
	}
	bctx, done := c.bound(ctx)
	err = call(bctx, c)
	done()
	switch {
	case err == nil:
		c.answered.Store(true)
	case noAnswerInTime(err) && c.opening != nil && c.opening():
		// The call's time ran out while its connection still waited for a path to the member (an API server
		// that dropped the forwards and hangs): it never reached etcd (review 2, item 5: a healthy member in
		// its cool-down was reverted for an API server outage).
		return fmt.Errorf("%w: the port-forward was still opening its path through the API server when the call's time ran out: %w", ErrNoLook, err)
	case c.answered.Load() && errors.Is(err, ErrForwardEnded):
		return fmt.Errorf("%w: %w", ErrNoLook, err)
	case errors.Is(err, ErrForwardEnded):
		return &ClientPortRefusedError{Cause: err}
	case !c.answered.Load() && noAnswerInTime(err):
		m.Forget(pod)
		return fmt.Errorf("%w (the port-forward, which never answered, is dropped; the next look opens a new one)", err)
	}
	return err
}

// ClientPortRefusedError is the end of a forward that never answered: etcd did not accept the connection on
// its client port (not listening yet, or not at all: a crash loop, a template whose etcd never serves). Its
// text says that, which is what the person reading a gate failure needs, rather than how client-go forwards.
type ClientPortRefusedError struct{ Cause error }

func (e *ClientPortRefusedError) Error() string {
	return "etcd does not accept connections on its client port (the port-forward to it ended before etcd ever answered)"
}

func (e *ClientPortRefusedError) Unwrap() error { return e.Cause }

// noAnswerInTime says err is a deadline: the call got no answer, as opposed to a refusal or an error.
func noAnswerInTime(err error) bool {
	return errors.Is(err, context.DeadlineExceeded) || status.Code(err) == codes.DeadlineExceeded
}
