// Package progresstest reads a status ConfigMap's data the way the tests of progress and of the engine check it.
package progresstest

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// ConditionsKey is the data key that holds the conditions as JSON (progress.StatusKeyConditions; this package
// cannot import progress, whose own tests use it).
const ConditionsKey = "conditions"

// ConditionsOf decodes the "conditions" key and checks each condition has the usual shape.
func ConditionsOf(t *testing.T, data map[string]string) map[string]metav1.Condition {
	t.Helper()
	var list []metav1.Condition
	require.NoError(t, json.Unmarshal([]byte(data[ConditionsKey]), &list))
	out := map[string]metav1.Condition{}
	for _, c := range list {
		assert.NotEmpty(t, c.Reason, c.Type)
		assert.Regexp(t, `^[A-Za-z]([A-Za-z0-9_,:]*[A-Za-z0-9_])?$`, c.Reason, "a valid metav1.Condition reason")
		assert.False(t, c.LastTransitionTime.IsZero(), c.Type)
		assert.Equal(t, string(c.Status), data[c.Type], "the %s key says the condition's status", c.Type)
		out[c.Type] = c
	}
	return out
}
