package member

import (
	"context"
	"errors"
	"io"
	"strings"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// DowngradeAction is one call of etcd's downgrade API (clientv3 Maintenance.Downgrade).
type DowngradeAction int

const (
	DowngradeValidate DowngradeAction = iota
	DowngradeEnable
	DowngradeCancel
)

func (a DowngradeAction) String() string {
	return [...]string{"validate", "enable", "cancel"}[a]
}

// ErrNoDowngradeJob is etcd's answer to a cancel when no downgrade is in flight (its leader ended it already).
var ErrNoDowngradeJob = errors.New("etcd has no downgrade job in flight")

// Transient says err is a broken connection or a call that did not come back, not etcd's answer. A
// port-forward that ended under the call is one (the end carries the call's "context canceled" as text only):
// taken for etcd's answer, it failed a downgrade as refused by etcd (CI, TestVersionChanges/mtls).
func Transient(err error) bool {
	if errors.Is(err, ErrForwardEnded) {
		return true
	}
	switch status.Code(err) {
	case codes.Unavailable, codes.DeadlineExceeded, codes.Canceled:
		return true
	case codes.Unknown:
		return errors.Is(err, context.DeadlineExceeded) || errors.Is(err, io.EOF) || strings.Contains(err.Error(), "connection refused")
	}
	return false
}
