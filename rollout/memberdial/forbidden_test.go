package memberdial

import (
	"errors"
	"testing"

	"github.com/stretchr/testify/assert"
)

// A refused upgrade is typed once, here, so nothing above reads client-go's words again.
func TestARefusedForwardIsTyped(t *testing.T) {
	refused := errors.New(`pods "etcd-2" is forbidden`)
	var typed *ForwardForbiddenError
	assert.ErrorAs(t, explainForbidden(refused, "db"), &typed)
	assert.Equal(t, "db", typed.Namespace)
	assert.ErrorIs(t, typed, refused, "the cause stays inspectable")
	assert.Equal(t, `the rollout's credentials may not create pods/portforward in namespace db: pods "etcd-2" is forbidden`, typed.Error())

	other := errors.New("connection refused")
	assert.Equal(t, other, explainForbidden(other, "db"))
	assert.NoError(t, explainForbidden(nil, "db"))
}
