package rollout

import (
	"fmt"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
)

// RBACHint ends every error that the API server refused for lack of permission. The API server's own message
// already names the verb and the resource; what an operator also needs is where the full list of permissions
// is, so one missing rule does not turn into a round of trial and error.
const RBACHint = "the rollout's credentials lack a permission: deploy/rbac/role.yaml lists every one a rollout needs"

// explainForbidden appends RBACHint to an error that holds a Kubernetes Forbidden answer. Many of those reach
// the caller as text (a member's Problem inside a blocked plan), so the API server's wording " is forbidden"
// counts as well as a typed StatusError.
func explainForbidden(err error) error {
	if err == nil || strings.Contains(err.Error(), RBACHint) {
		return err
	}
	if apierrors.IsForbidden(err) || strings.Contains(err.Error(), " is forbidden") {
		return fmt.Errorf("%w (%s)", err, RBACHint)
	}
	return err
}
