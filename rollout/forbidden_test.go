package rollout

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/etcd-rollout/pulumi-etcd-rollout/rollout/memberdial"
)

func TestExplainForbidden(t *testing.T) {
	typed := apierrors.NewForbidden(schema.GroupResource{Group: "apps", Resource: "statefulsets"}, "etcd",
		errors.New(`User "system:serviceaccount:ns:etcd-rollout" cannot patch resource "statefulsets"`))
	for _, tc := range []struct {
		name     string
		err      error
		wantHint bool
	}{
		{"nil stays nil", nil, false},
		{"a typed Forbidden", typed, true},
		{"a wrapped Forbidden", fmt.Errorf("setting partition: %w", typed), true},
		{"a Forbidden flattened into a member's problem, kept as its reason", fmt.Errorf("%w (not waiting: %w)", ErrBlocked,
			&MemberProblemError{Pod: "etcd-0", Reason: ProblemForbidden, Problem: `reading pod: pods "etcd-0" is forbidden: User ...`}), true},
		{"a refused port-forward", fmt.Errorf("status of etcd-0: %w", &memberdial.ForwardForbiddenError{Namespace: "db", Err: errors.New("forbidden")}), true},
		{"a gate whose last look was refused", &GateTimeoutError{Pod: "etcd-0", Gate: GatePodReady, Reason: ProblemForbidden}, true},
		{"a member problem of another reason", &MemberProblemError{Pod: "etcd-0", Reason: ProblemCertificateRefused, Problem: "refused"}, false},
		{"another error", errors.New("no answer in time"), false},
		{"already explained", fmt.Errorf("x is forbidden (%s)", RBACHint), true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := explainForbidden(tc.err)
			if tc.err == nil {
				assert.NoError(t, got)
				return
			}
			assert.ErrorIs(t, got, tc.err, "the cause stays inspectable")
			if tc.wantHint {
				assert.Contains(t, got.Error(), RBACHint)
				assert.Equal(t, 1, strings.Count(got.Error(), RBACHint), "the hint is given once")
			} else {
				assert.NotContains(t, got.Error(), RBACHint)
			}
		})
	}
}
