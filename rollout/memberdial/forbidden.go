package memberdial

import (
	"fmt"
	"strings"
)

// ForwardForbiddenError is a port-forward the API server refused the rollout's credentials.
type ForwardForbiddenError struct {
	Namespace string
	Err       error
}

func (e *ForwardForbiddenError) Error() string {
	return fmt.Sprintf("the rollout's credentials may not create pods/portforward in namespace %s: %v", e.Namespace, e.Err)
}

func (e *ForwardForbiddenError) Unwrap() error { return e.Err }

// explainForbidden names the missing permission when the API server refuses a port-forward: the upgrade
// error client-go returns then reads `pods "x" is forbidden: ` with the reason cut off, which names neither
// the verb nor the subresource an operator must grant. That text is all client-go gives, so it is read here,
// once, and typed for everyone above.
func explainForbidden(err error, namespace string) error {
	if err != nil && strings.Contains(err.Error(), "forbidden") {
		return &ForwardForbiddenError{Namespace: namespace, Err: err}
	}
	return err
}
