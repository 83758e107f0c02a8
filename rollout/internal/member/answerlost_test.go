package member

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

func TestAnswerLost(t *testing.T) {
	tests := []struct {
		name string
		err  error
		want bool
	}{
		{"a deadline", fmt.Errorf("move leader: %w", context.DeadlineExceeded), true},
		{"gRPC unavailable", status.Error(codes.Unavailable, "error reading from server: EOF"), true},
		{"gRPC deadline", status.Error(codes.DeadlineExceeded, "context deadline exceeded"), true},
		{"no look", fmt.Errorf("%w: port-forward to db/etcd-0: the API server is away", ErrNoLook), true},
		{"etcd refuses", status.Error(codes.FailedPrecondition, "etcdserver: not leader"), false},
		{"a plain error", errors.New("etcdserver: bad leader transferee"), false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) { assert.Equal(t, tt.want, AnswerLost(tt.err)) })
	}
}
