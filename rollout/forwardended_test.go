package rollout

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// A call bound to a forward ends with the forward, and says so; a call that finished leaves nothing behind.
func TestACallEndsWithItsForward(t *testing.T) {
	tests := []struct {
		name      string
		ended     bool
		wantCause error
	}{
		{name: "forward ends during the call", ended: true, wantCause: errForwardEnded},
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
				require.ErrorIs(t, err, errForwardEnded)
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
