package rollout

import (
	"errors"

	apierrors "k8s.io/apimachinery/pkg/api/errors"

	"github.com/etcd-rollout/pulumi-etcd-rollout/rollout/memberdial"

	"github.com/etcd-rollout/pulumi-etcd-rollout/rollout/internal/member"
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
type TLSMaterialError struct{ msg string }

func (e *TLSMaterialError) Error() string { return e.msg }
