package rollout

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

// A cut never splits a character: the messages carry arrows and quotes.
func TestTruncateKeepsRunesWhole(t *testing.T) {
	tests := []struct {
		in   string
		n    int
		want string
	}{
		{"short", 10, "short"},
		{"abcdef", 3, "abc…"},
		{"a→b", 2, "a…"}, // "→" is 3 bytes: the cut goes back to its start
		{"a→b", 4, "a→…"},
	}
	for _, tt := range tests {
		assert.Equal(t, tt.want, Truncate(tt.in, tt.n), "%q, %d", tt.in, tt.n)
	}
}
