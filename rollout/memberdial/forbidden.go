package memberdial

import (
	"fmt"
	"strings"
)

// explainForbidden names the missing permission when the API server refuses a port-forward: the upgrade
// error client-go returns then reads `pods "x" is forbidden: ` with the reason cut off, which names neither
// the verb nor the subresource an operator must grant.
func explainForbidden(err error, namespace string) error {
	if err != nil && strings.Contains(err.Error(), "forbidden") {
		return fmt.Errorf("the rollout's credentials may not create pods/portforward in namespace %s: %w", namespace, err)
	}
	return err
}
