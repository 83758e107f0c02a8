package rollout

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

// A run refused before its end says the term it started with rather than a term of 0 after it.
func TestSummaryOfARunThatReadNoTermAfter(t *testing.T) {
	r := Result{UpdateRevision: "rev-b", TermBefore: 3}
	assert.Contains(t, r.Summary(), "(raft term 3 at the start; not read after)")
	r.TermAfter = 4
	assert.Contains(t, r.Summary(), "(raft term 3 → 4)")
}
