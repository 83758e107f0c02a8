package member

import (
	"errors"
	"fmt"

	apierrors "k8s.io/apimachinery/pkg/api/errors"

	"github.com/etcd-rollout/pulumi-etcd-rollout/rollout/memberdial"
)

// ErrNoLook marks a look that never reached the member's etcd: no port-forward could be opened (the API
// server or the kubelet did not answer), or one that had already answered ended under the call (the API
// server restarting ends every forward). It says nothing about the member: its own failures show as refusals,
// errors or timeouts on a forward that could be opened. A member that passed its gates is therefore not
// failed on such a look; the engine looks again until etcd answers, and the member's incarnation then tells a
// transport blip (the same process) from a restart (a new one). Before this, an API server restart during a
// cool-down reverted a healthy member (TestAPIServerRestartDuringCoolDown).
var ErrNoLook = errors.New("the look did not reach etcd")

// CouldNotLook says err is a look that never reached the member (ErrNoLook).
func CouldNotLook(err error) bool { return errors.Is(err, ErrNoLook) }

// noLookOpening marks a failure to open the member's port-forward as ErrNoLook, except the two that are
// answers about the member or the run: its pod is gone (the member is down), or the rollout may not forward
// to it (no look will ever succeed).
func noLookOpening(err error) error {
	var forbidden *memberdial.ForwardForbiddenError
	if err == nil || apierrors.IsNotFound(err) || apierrors.IsForbidden(err) || errors.As(err, &forbidden) {
		return err
	}
	return fmt.Errorf("%w: %w", ErrNoLook, err)
}
