package rollout

import (
	"errors"
	"fmt"

	apierrors "k8s.io/apimachinery/pkg/api/errors"

	"github.com/etcd-rollout/pulumi-etcd-rollout/rollout/memberdial"

	"github.com/etcd-rollout/pulumi-etcd-rollout/rollout/internal/member"
	"github.com/etcd-rollout/pulumi-etcd-rollout/rollout/internal/tlsmaterial"
)

// problemOf is the reason of a failed call to a member (or to the API server about it), from the error's
// chain: the types each layer wraps its failures in, never their text.
func problemOf(err error) ProblemReason {
	var (
		refused     *member.CertRefusedError
		memberCert  *member.MemberCertError
		material    *TLSMaterialError
		notAccepted *member.ClientPortRefusedError
		forbidden   *memberdial.ForwardForbiddenError
	)
	switch {
	case err == nil:
		return ProblemNone
	case apierrors.IsForbidden(err) || errors.As(err, &forbidden):
		return ProblemForbidden
	case errors.As(err, &refused) || errors.As(err, &memberCert):
		return ProblemCertificateRefused
	case errors.As(err, &material):
		return ProblemTLSMaterial
	case member.CouldNotLook(err):
		return ProblemUnreached
	case errors.As(err, &notAccepted):
		return ProblemRefusingClients
	}
	return ProblemUnhealthy
}

// TLSMaterialError is client TLS material the rollout cannot use, named by its files and never quoted.
type TLSMaterialError = tlsmaterial.Error

// RBACHint ends every error that the API server refused for lack of permission. The API server's own message
// already names the verb and the resource; what an operator also needs is where the full list of permissions
// is, so one missing rule does not turn into a round of trial and error.
const RBACHint = "the rollout's credentials lack a permission: deploy/rbac/role.yaml lists every one a rollout needs"

// explainForbidden appends RBACHint to an error whose chain holds a refusal of the API server: a typed
// Forbidden, a refused port-forward, or a member or gate whose problem is ProblemForbidden (a Forbidden that
// reached a member's Problem as text keeps its reason beside it).
func explainForbidden(err error) error {
	var hinted *rbacHintError
	if err == nil || errors.As(err, &hinted) || !forbidden(err) {
		return err
	}
	return &rbacHintError{err: err}
}

func forbidden(err error) bool {
	var (
		forward *memberdial.ForwardForbiddenError
		member  *MemberProblemError
		gate    *GateTimeoutError
	)
	return apierrors.IsForbidden(err) || errors.As(err, &forward) ||
		(errors.As(err, &member) && member.Reason == ProblemForbidden) ||
		(errors.As(err, &gate) && gate.Reason == ProblemForbidden)
}

// rbacHintError is an error explained with RBACHint.
type rbacHintError struct{ err error }

func (e *rbacHintError) Error() string { return fmt.Sprintf("%v (%s)", e.err, RBACHint) }

func (e *rbacHintError) Unwrap() error { return e.err }
