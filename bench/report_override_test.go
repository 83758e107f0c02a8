package main

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
)

// Results of a run that overrode the engine's stability window say so at the top and count no target, so
// they are never taken for the engine's own.
func TestResultsWithAnOverriddenWindowCountNoTarget(t *testing.T) {
	tests := []struct {
		name       string
		stableFor  string
		overridden bool
	}{
		{"the engine's defaults", "", false},
		{"window overridden", "1ns", true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			meta := &Meta{Strategies: []StrategyMeta{{Name: "default"}, {Name: "engine-cd0", StableFor: tt.stableFor}}}
			md := renderMarkdown(meta, map[string]map[string]*Cell{}, nil)
			assert.Equal(t, tt.overridden, strings.Contains(md, "NOT THE ENGINE'S DEFAULTS: the canary's stability window was set to 1ns"))
			assert.Equal(t, tt.overridden, strings.Contains(md, "**NOT COUNTED (stability window overridden)**"))
			assert.Equal(t, !tt.overridden, strings.Contains(md, "**NOT MEASURED**"))
		})
	}
}
