package rollout

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"

	"github.com/etcd-rollout/pulumi-etcd-rollout/rollout/internal/lease"
	"github.com/etcd-rollout/pulumi-etcd-rollout/rollout/internal/member"
	"github.com/etcd-rollout/pulumi-etcd-rollout/rollout/internal/statefulset"
	"github.com/etcd-rollout/pulumi-etcd-rollout/rollout/internal/tlsmaterial"
	"github.com/etcd-rollout/pulumi-etcd-rollout/rollout/internal/trust"
	"github.com/etcd-rollout/pulumi-etcd-rollout/rollout/memberdial"
)

// ErrInterference is wrapped when someone else changed the StatefulSet (partition, template, replicas)
// while the rollout ran, or lowered the partition before it started. The engine stops rather than race.
var ErrInterference = statefulset.ErrInterference

// ErrReplacedMidGate is wrapped when a member's pod was deleted or replaced by someone else during its gates.
var ErrReplacedMidGate = statefulset.ErrReplacedMidGate

// InterferenceError is a conditional write of the engine that the StatefulSet refused because its spec
// moved past the generation the run had observed: someone else wrote it in between. Nothing was written.
type InterferenceError = statefulset.InterferenceError

// ErrNotRecreated is wrapped when the StatefulSet controller did not replace a member's pod after the
// partition was lowered for it: the revision never ran there, so it is no verdict on the revision and nothing
// is reverted.
var ErrNotRecreated = errors.New("the StatefulSet controller did not recreate the pod")

// ErrPartitionNotLocked is wrapped when a run ends without setting the partition back to replicas: the
// re-lock failed, or another run holds the lease now. Every other exit of a run that lowered it leaves it
// locked, which is what a failure's message may then promise.
var ErrPartitionNotLocked = errors.New("the partition may still be lowered")

// ErrLeaseLost is the cause when the run's Lease could not be renewed and another holder may now act.
var ErrLeaseLost = lease.ErrLost

// LeaseName is the coordination.k8s.io Lease that serialises rollouts of one StatefulSet.
func LeaseName(sts string) string { return lease.Name(sts) }

// GateTimeoutError says which member did not pass which gate in time, or fell out of it after passing, and
// what was last seen of it, so an operator can go straight to the right pod.
type GateTimeoutError struct {
	Pod      string
	Gate     string // "pod ready" or "etcd health"
	Timeout  time.Duration
	LastSeen string
	// PassedAt is set when the member had passed the gate and then did not stay healthy (a revision that
	// crash-loops answers for a moment after each start).
	PassedAt time.Time
	// PodStayedUp says the kubelet kept the member's pod Ready, with no container restart, for the whole
	// etcd gate (health.PodWitness): only then may a member that does not answer us be unknown rather than failed.
	PodStayedUp bool
	// Unreached says the last look never reached the member's etcd (member.ErrNoLook), as against a refusal or a
	// timeout on a forward that opened, which is the member's own answer.
	Unreached bool
	// Reason is LastSeen's reason, when the last look failed for one (ProblemForbidden, …).
	Reason ProblemReason
}

// RevertedError says a member failed its gates on the new revision and was brought back, healthy, on the
// StatefulSet's current revision. It unwraps to the gate failure, so callers that branch on
// *GateTimeoutError (the CLI's exit code 5) treat both alike.
type RevertedError struct {
	Pod string
	// From is the revision that failed; To the one the member runs again.
	From, To string
	Cause    *GateTimeoutError
}

func (e *RevertedError) Error() string {
	return fmt.Sprintf("reverted %s to %s: revision %s failed %s", e.Pod, e.To, e.From, e.Cause.failed())
}

func (e *RevertedError) Unwrap() error { return e.Cause }

// failed is the gate failure without the pod's name, for sentences that already name it.
func (e *GateTimeoutError) failed() string {
	if !e.PassedAt.IsZero() {
		return fmt.Sprintf("the %s gate (passed at %s, then did not stay healthy): %s", e.Gate, e.PassedAt.Format("15:04:05"), e.LastSeen)
	}
	return fmt.Sprintf("the %s gate (not passed within %s): %s", e.Gate, e.Timeout, e.LastSeen)
}

func (e *GateTimeoutError) Error() string {
	if !e.PassedAt.IsZero() {
		return fmt.Sprintf("%s passed the %s gate at %s but did not stay healthy (a crash loop?); last seen: %s",
			e.Pod, e.Gate, e.PassedAt.Format("15:04:05"), e.LastSeen)
	}
	return fmt.Sprintf("%s did not pass the %s gate within %s; last seen: %s", e.Pod, e.Gate, e.Timeout, e.LastSeen)
}

// LockedError is returned when another rollout holds the StatefulSet's Lease.
type LockedError = lease.LockedError

// ErrPeerTrust is wrapped when restarting a member onto the template's peer TLS material would cut it off its
// peers as they run now (issue 33): waiting changes nothing, so preview and the run refuse at once, before
// anything restarts. A TrustError says who refuses what.
var ErrPeerTrust = errors.New("a restart would cut a member off its peers")

// ErrClientTrust is wrapped when restarting a member onto the template's client TLS material would cut it off
// its clients (issue 33): its new trust file refuses the engine's client certificate, or drops a CA that still
// signs what the other members serve, or the engine would refuse its new server certificate. The member would
// keep its vote, but the engine could never call it healthy, and the clients refused with it would lose it.
var ErrClientTrust = errors.New("a restart would cut a member off its clients")

// isTrustRefusal says err is a refusal of the trust check, on either side.
func isTrustRefusal(err error) bool {
	return errors.Is(err, ErrPeerTrust) || errors.Is(err, ErrClientTrust)
}

// TrustError lists the reasons, peer and client side. Its first line is the first reason (member, side, whose
// certificate, issuer, what is trusted, what to do); the others follow, one per line.
type TrustError struct {
	Refusals []trust.Refusal
}

func (e *TrustError) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%v: %v", sideError(e.Refusals[0].Side), e.Refusals[0].Error())
	if len(e.Refusals) > 1 {
		fmt.Fprintf(&b, " (and %d more below)", len(e.Refusals)-1)
		for _, r := range e.Refusals[1:] {
			b.WriteString("\n  " + r.Error())
		}
	}
	return b.String()
}

// Unwrap is ErrPeerTrust, ErrClientTrust or both: the sides the refusals are on.
func (e *TrustError) Unwrap() []error {
	var out []error
	for _, r := range e.Refusals {
		if err := sideError(r.Side); !slices.Contains(out, err) {
			out = append(out, err)
		}
	}
	return out
}

func sideError(s trust.Side) error {
	if s == trust.Client {
		return ErrClientTrust
	}
	return ErrPeerTrust
}

// DowngradeNotValidatedError is a preview's downgrade that etcd did not validate (it refused, or could not be
// asked): the preview fails on it rather than show a plan whose point of no return etcd may refuse. Its text
// is etcd's answer, as ValidateDowngrade gives it.
type DowngradeNotValidatedError struct {
	Err error
}

func (e *DowngradeNotValidatedError) Error() string { return e.Err.Error() }
func (e *DowngradeNotValidatedError) Unwrap() error { return e.Err }

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
