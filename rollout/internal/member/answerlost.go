package member

import (
	"context"
	"errors"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// AnswerLost says a call's error is no answer of etcd's (a refusal, which changes nothing) but a call that ended
// without one: its deadline, a connection or a port-forward that went away. Whatever the call asked may have
// happened.
func AnswerLost(err error) bool {
	if errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled) || CouldNotLook(err) {
		return true
	}
	switch status.Code(err) {
	case codes.DeadlineExceeded, codes.Unavailable, codes.Canceled:
		return true
	}
	return false
}
