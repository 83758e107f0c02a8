package member

import (
	"context"
	"errors"
	"fmt"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/etcd-rollout/pulumi-etcd-rollout/rollout/memberdial"
)

// A call bound to a forward ends with the forward, and says so; a call that finished leaves nothing behind.
func TestACallEndsWithItsForward(t *testing.T) {
	tests := []struct {
		name      string
		ended     bool
		wantCause error
	}{
		{name: "forward ends during the call", ended: true, wantCause: ErrForwardEnded},
		{name: "call finishes first", ended: false, wantCause: nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ended := make(chan struct{})
			c := &memberClient{ended: ended}
			ctx, done := c.bound(context.Background())
			if tt.ended {
				close(ended)
				select {
				case <-ctx.Done():
				case <-time.After(5 * time.Second):
					t.Fatal("the call's context did not end with the forward")
				}
			}
			assert.Equal(t, tt.wantCause, context.Cause(ctx))
			err := forwardEnded(ctx, context.Canceled)
			if tt.wantCause != nil {
				require.ErrorIs(t, err, ErrForwardEnded)
				assert.Contains(t, explain(ctx, context.Canceled).Error(), "port-forward to the member ended")
			} else {
				assert.Equal(t, context.Canceled, err)
			}
			done()
			assert.True(t, errors.Is(context.Cause(ctx), context.Canceled) || tt.ended, "done ends the bound context")
		})
	}
}

// Without a way to tell (a direct dialer), calls keep the caller's context.
func TestACallWithoutAnEndingDialerKeepsItsContext(t *testing.T) {
	ctx := context.Background()
	bctx, done := (&memberClient{}).bound(ctx)
	defer done()
	assert.Equal(t, ctx, bctx)
}

// endingForwards is a Dialer whose every forward can be ended by the test: each Endpoint after an end is a
// new forward with its own address.
type endingForwards struct {
	mu       sync.Mutex
	opened   int
	released int
	current  chan struct{}
}

func (f *endingForwards) Endpoint(context.Context, string, string, int) (string, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.current == nil {
		f.opened++
		f.current = make(chan struct{})
	}
	return fmt.Sprintf("127.0.0.1:%d", 20000+f.opened), nil
}

func (f *endingForwards) Ended(string) <-chan struct{} {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.current
}

// end ends the current forward, as client-go does when one of its connections fails.
func (f *endingForwards) end() {
	f.mu.Lock()
	defer f.mu.Unlock()
	close(f.current)
	f.current = nil
}

// Release drops the current forward, as PortForward.Release does: the next Endpoint opens a new one.
func (f *endingForwards) Release(string, string, int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.released++
	f.current = nil
}
func (f *endingForwards) Close() error { return nil }

// A read whose forward ended is never taken again at once, even when the forward had answered before:
// the end may be the member's own crash, which the stability window and the cool-down must see. The end of
// a forward that had answered is marked as a look that did not reach etcd (the member's incarnation decides
// later); the end of a fresh one is the member's refusal.
func TestAnEndedForwardIsTheLooksAnswer(t *testing.T) {
	refused := errors.New("member says no")
	tests := []struct {
		name          string
		answeredFirst bool
		attempts      []string // per attempt: "end" (the forward ends under it), "ok", "fail"
		wantErr       error
		wantNoLook    bool
		wantForwards  int
	}{
		{name: "answering forward ends: the member may have crashed", answeredFirst: true, attempts: []string{"end"}, wantErr: ErrForwardEnded, wantNoLook: true, wantForwards: 1},
		{name: "fresh forward ends: the member refused", attempts: []string{"end"}, wantErr: ErrForwardEnded, wantForwards: 1},
		{name: "answering forward fails otherwise", answeredFirst: true, attempts: []string{"fail"}, wantErr: refused, wantForwards: 1},
		{name: "answering forward answers", answeredFirst: true, attempts: []string{"ok"}, wantForwards: 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dialer := &endingForwards{}
			m := NewClients(dialer, "ns", "etcd", 2379, nil)
			defer m.Close()
			if tt.answeredFirst {
				require.NoError(t, m.read(context.Background(), "etcd-0", func(context.Context, *memberClient) error { return nil }))
			}
			calls := 0
			err := m.read(context.Background(), "etcd-0", func(ctx context.Context, _ *memberClient) error {
				require.Less(t, calls, len(tt.attempts), "more attempts than expected")
				what := tt.attempts[calls]
				calls++
				switch what {
				case "end":
					dialer.end()
					<-ctx.Done()
					return explain(ctx, ctx.Err())
				case "fail":
					return refused
				}
				return nil
			})
			assert.Equal(t, len(tt.attempts), calls, "attempts")
			if tt.wantErr != nil {
				require.ErrorIs(t, err, tt.wantErr)
				assert.Equal(t, tt.wantNoLook, CouldNotLook(err), "a look that did not reach etcd")
			} else {
				require.NoError(t, err)
			}
			assert.Equal(t, tt.wantForwards, dialer.opened, "forwards opened")
		})
	}
}

// A forward that never answered and let a call wait out its deadline is dropped, so the next look opens a
// new one; one that answered before is kept (the member is slow, not the forward).
func TestAForwardThatNeverAnsweredIsDroppedAfterATimeout(t *testing.T) {
	for _, answeredFirst := range []bool{false, true} {
		t.Run(fmt.Sprintf("answered before: %v", answeredFirst), func(t *testing.T) {
			dialer := &endingForwards{}
			m := NewClients(dialer, "ns", "etcd", 2379, nil)
			defer m.Close()
			if answeredFirst {
				require.NoError(t, m.read(context.Background(), "etcd-0", func(context.Context, *memberClient) error { return nil }))
			}
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Millisecond)
			defer cancel()
			err := m.read(ctx, "etcd-0", func(ctx context.Context, _ *memberClient) error {
				<-ctx.Done()
				return explain(ctx, ctx.Err())
			})
			require.ErrorIs(t, err, context.DeadlineExceeded)
			require.NoError(t, m.read(context.Background(), "etcd-0", func(context.Context, *memberClient) error { return nil }))
			if answeredFirst {
				assert.Equal(t, 0, dialer.released, "forwards dropped")
				assert.Equal(t, 1, dialer.opened, "forwards opened")
			} else {
				assert.Equal(t, 1, dialer.released, "forwards dropped")
				assert.Equal(t, 2, dialer.opened, "forwards opened: the look after the timeout opens a new one")
				assert.Contains(t, err.Error(), "never answered, is dropped")
			}
		})
	}
}

// openingDialer hands out an address whose every connection waits for a path to the member that never opens,
// as a port-forward's websocket dial to an API server that dropped every forward and then hangs.
type openingDialer struct{ addrDialer }

func (openingDialer) Opening(string) bool { return true }

// A look whose time runs out while its connection still waits for a path to the member never reached etcd: it
// is "could not look", never the member's own failure (review 2, item 5: a healthy member in its cool-down was
// reverted because the API server hung after dropping its forwards). A dialer without such paths leaves the
// timeout the member's.
func TestALookStuckOpeningItsPathIsNoLook(t *testing.T) {
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	serveEach(t, lis, func(conn net.Conn) { t.Cleanup(func() { _ = conn.Close() }) }) // accepted, never answered
	for _, tt := range []struct {
		name   string
		dialer memberdial.Dialer
		noLook bool
	}{
		{"a path still opening", openingDialer{addrDialer{lis.Addr().String()}}, true},
		{"a plain address", addrDialer{lis.Addr().String()}, false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			m := NewClients(tt.dialer, "db", "etcd-headless", 2379, nil)
			defer m.Close()
			ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
			defer cancel()
			_, err := m.Status(ctx, "etcd-0")
			require.Error(t, err)
			assert.Equal(t, tt.noLook, CouldNotLook(err), "%v", err)
		})
	}
}

// serveEach accepts every connection on lis and hands it to handle, until the test ends and closes lis.
func serveEach(t *testing.T, lis net.Listener, handle func(net.Conn)) {
	t.Cleanup(func() { _ = lis.Close() })
	go func() {
		for {
			conn, err := lis.Accept()
			if err != nil {
				return
			}
			handle(conn)
		}
	}()
}
