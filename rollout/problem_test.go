package rollout

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/etcd-rollout/pulumi-etcd-rollout/rollout/memberdial"

	"github.com/etcd-rollout/pulumi-etcd-rollout/rollout/internal/member"
)

// A failed call's reason comes from the types its layers wrap it in, however it is worded or wrapped.
func TestProblemOfReadsTheErrorsChain(t *testing.T) {
	forbidden := apierrors.NewForbidden(schema.GroupResource{Resource: "pods"}, "etcd-0", errors.New("no"))
	tests := []struct {
		name string
		err  error
		want ProblemReason
	}{
		{"no error", nil, ProblemNone},
		{"a Forbidden read", fmt.Errorf("reading pod: %w", forbidden), ProblemForbidden},
		{"a refused port-forward", fmt.Errorf("status of etcd-0: %w", &memberdial.ForwardForbiddenError{Namespace: "db", Err: errors.New("x")}), ProblemForbidden},
		{"a refused member certificate", fmt.Errorf("status of etcd-0: %w", &member.CertRefusedError{Refused: &member.MemberCertError{Member: "etcd-0"}, Timeout: context.DeadlineExceeded}), ProblemCertificateRefused},
		{"client TLS material", fmt.Errorf("reading TLS material from pod etcd-0: %w", &TLSMaterialError{Text: "tls caFile /ca holds no PEM certificate"}), ProblemTLSMaterial},
		{"a look that never reached etcd", fmt.Errorf("status of etcd-0: %w: %w", member.ErrNoLook, member.ErrForwardEnded), ProblemUnreached},
		{"a client port that refuses us", fmt.Errorf("status of etcd-0: %w", &member.ClientPortRefusedError{Cause: member.ErrForwardEnded}), ProblemRefusingClients},
		{"no answer in time", fmt.Errorf("no answer in time (%w)", context.DeadlineExceeded), ProblemUnhealthy},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			assert.Equal(t, tt.want, problemOf(tt.err))
		})
	}
}

func TestOnlyRefusalsCannotBeWaitedOut(t *testing.T) {
	for _, r := range []ProblemReason{ProblemNone, ProblemPodMissing, ProblemPodTerminating, ProblemUnreached, ProblemRefusingClients,
		ProblemNotVoting, ProblemNoLeader, ProblemEtcdErrors, ProblemUnhealthy, ProblemDownAfterPassing} {
		assert.False(t, r.WaitingCannotFix(), r)
	}
	for _, r := range []ProblemReason{ProblemForbidden, ProblemCertificateRefused, ProblemTLSMaterial} {
		assert.True(t, r.WaitingCannotFix(), r)
	}
}
