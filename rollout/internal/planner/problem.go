package planner

// ProblemReason says why a member is not healthy, set where the member is observed. Decisions (whether
// waiting can help, whether to add the RBAC hint) switch on it; MemberState.Problem is the same thing in
// words for people, and free to change.
type ProblemReason string

const (
	// ProblemNone: the member is healthy, or nothing is known against it.
	ProblemNone ProblemReason = ""
	// ProblemPodMissing: the member's pod does not exist (being recreated, or deleted).
	ProblemPodMissing ProblemReason = "PodMissing"
	// ProblemPodTerminating: the member's pod is being deleted.
	ProblemPodTerminating ProblemReason = "PodTerminating"
	// ProblemForbidden: the API server refused the rollout's credentials (reading the pod, a port-forward,
	// the TLS material).
	ProblemForbidden ProblemReason = "Forbidden"
	// ProblemCertificateRefused: the member's TLS certificate does not verify against tls.caFile or is not
	// valid for the member.
	ProblemCertificateRefused ProblemReason = "CertificateRefused"
	// ProblemTLSMaterial: the client TLS files are wrong (not mounted, missing from their Secret, no PEM
	// certificate, not a key pair).
	ProblemTLSMaterial ProblemReason = "TLSMaterial"
	// ProblemUnreached: no look reached the member's etcd (no port-forward could be opened, or one that had
	// answered ended under the look); nothing is known of the member, which may be healthy.
	ProblemUnreached ProblemReason = "Unreached"
	// ProblemRefusingClients: etcd did not accept a connection on its client port.
	ProblemRefusingClients ProblemReason = "RefusingClients"
	// ProblemNotVoting: the member is a learner.
	ProblemNotVoting ProblemReason = "NotVoting"
	// ProblemNoLeader: the member sees no leader.
	ProblemNoLeader ProblemReason = "NoLeader"
	// ProblemEtcdErrors: etcd reports errors of its own (an alarm).
	ProblemEtcdErrors ProblemReason = "EtcdErrors"
	// ProblemUnhealthy: the member answered, or was reached, but did not pass a health check in time.
	ProblemUnhealthy ProblemReason = "Unhealthy"
	// ProblemDownAfterPassing: a look after the member passed its gates found it down.
	ProblemDownAfterPassing ProblemReason = "DownAfterPassing"
)

// WaitingCannotFix says whether the problem is one no amount of holding cures: a permission the API server
// refused, a member certificate the engine refused, client TLS material that is wrong. A blocked cluster
// with one of those is bad input, reported at once rather than after the ready timeout.
func (r ProblemReason) WaitingCannotFix() bool {
	switch r {
	case ProblemForbidden, ProblemCertificateRefused, ProblemTLSMaterial:
		return true
	}
	return false
}

// MemberProblemError is a member whose problem stops the run at once (WaitingCannotFix): it says which member
// and why, for the caller to branch on.
type MemberProblemError struct {
	Pod    string
	Reason ProblemReason
	// Problem is the member's problem in words.
	Problem string
}

func (e *MemberProblemError) Error() string { return e.Pod + ": " + e.Problem }
