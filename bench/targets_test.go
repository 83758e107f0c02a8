package main

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

const retryGoal = "engine, every scenario, hung shutdown included: 0 failed writes for the production-like (retrying) client (issue #14)"

func TestEvaluateTargets(t *testing.T) {
	meta := &Meta{Scenarios: []ScenarioMeta{{Name: "easy", Replicas: 3}, {Name: "hung", Replicas: 3}}}
	good := func() map[string]map[string]*Cell {
		return map[string]map[string]*Cell{
			"easy": {
				"default":    {Wall: []float64{4, 4}, Gaps: []float64{100}},
				"engine":     {Wall: []float64{6, 6}, Gaps: []float64{50}, TransfersByLeader: map[int][]float64{0: {1}, 1: {1}, 2: {2}}, RetryRuns: 2, Retry: RetryClientStats{Writes: 100}},
				"engine-cd0": {Wall: []float64{4.4, 4.6}, Gaps: []float64{50}, TransfersByLeader: map[int][]float64{0: {1}, 1: {1}, 2: {2}}, RetryRuns: 2, Retry: RetryClientStats{Writes: 100}},
			},
			"hung": {
				"default":    {Gaps: []float64{1200}, Elections: 3},
				"engine":     {Gaps: []float64{150}, Writes: 100, TransfersByLeader: map[int][]float64{0: {1}, 1: {1}, 2: {2}}, RetryRuns: 2, Retry: RetryClientStats{Writes: 100}},
				"engine-cd0": {Gaps: []float64{200}, Writes: 100, TransfersByLeader: map[int][]float64{0: {1}, 1: {1}, 2: {2}}, RetryRuns: 2, Retry: RetryClientStats{Writes: 100}},
			},
		}
	}
	byName := func(gs []Goal) map[string]Goal {
		out := map[string]Goal{}
		for _, g := range gs {
			out[g.Name] = g
		}
		return out
	}
	tests := []struct {
		name    string
		mutate  func(map[string]map[string]*Cell)
		goal    string
		met     bool
		unknown bool
	}{
		{"transfers weighed by starting ordinal: 1, 1, 2 → 1.33", func(c map[string]map[string]*Cell) {
			c["easy"]["engine"].TransfersByLeader = map[int][]float64{0: {1, 1, 1, 1}, 1: {1, 1, 1}, 2: {2, 2, 2}}
		}, "engine: mean leader transfers ≤ 1.34 per 3-member rollout (each starting ordinal weighed alike)", true, false},
		{"all good: elections", nil, "engine, every scenario: 0 real elections", true, false},
		{"an election in one engine cell", func(c map[string]map[string]*Cell) { c["hung"]["engine-cd0"].Elections = 1 },
			"engine, every scenario: 0 real elections", false, false},
		{"the default's elections do not count", nil, "engine, every scenario: 0 real elections", true, false},
		{"quorum lost once", func(c map[string]map[string]*Cell) { c["easy"]["engine"].QuorumLossRuns = 1 },
			"engine, every scenario: never a quorum loss", false, false},
		{"a failed write in hung", func(c map[string]map[string]*Cell) { c["hung"]["engine"].FailedWrites = 1 },
			"engine: no failed write in the heavy and hung-shutdown scenarios", false, false},
		{"too many transfers", func(c map[string]map[string]*Cell) {
			c["easy"]["engine"].TransfersByLeader = map[int][]float64{0: {1}, 1: {1, 1, 1}, 2: {2, 3}}
		},
			"engine: mean leader transfers ≤ 1.34 per 3-member rollout (each starting ordinal weighed alike)", false, false},
		{"gap 200 of 1200 is within 0.2×", nil, "engine: worst write gap in heavy and hung shutdown ≤ 0.2× the default's", true, false},
		{"gap 300 of 1200 is not", func(c map[string]map[string]*Cell) { c["hung"]["engine"].Gaps = []float64{300} },
			"engine: worst write gap in heavy and hung shutdown ≤ 0.2× the default's", false, false},
		{"4.5 s vs 4 s is within 1.2×", nil, "engine with cool-down 0, easy scenario: wall time ≤ 1.2× the default's", true, false},
		{"5 s vs 4 s is not", func(c map[string]map[string]*Cell) { c["easy"]["engine-cd0"].Wall = []float64{5} },
			"engine with cool-down 0, easy scenario: wall time ≤ 1.2× the default's", false, false},
		{"no ten-clusters scenario: not measured", nil, "engine: 10 clusters rolled at once in ≤ 1.5× the time of one", false, true},
		{"production-like client: no write lost by any engine cell", func(c map[string]map[string]*Cell) {
			c["hung"]["default"].RetryRuns, c["hung"]["default"].Retry.FailedWrites = 2, 7 // the default's do not count
			c["hung"]["engine"].FailedWrites, c["hung"]["engine"].Retry.Retries = 3, 3     // retried, not lost
		}, retryGoal, true, false},
		{"production-like client: one write lost in hung", func(c map[string]map[string]*Cell) {
			c["hung"]["engine-cd0"].Retry.FailedWrites = 1
		}, retryGoal, false, false},
		{"production-like client: a write lost outweighs a cell not measured", func(c map[string]map[string]*Cell) {
			c["hung"]["engine-cd0"].Retry.FailedWrites = 1
			c["easy"]["engine"].RetryRuns = 0
		}, retryGoal, false, false},
		{"production-like client: an engine cell without its data is not measured", func(c map[string]map[string]*Cell) {
			c["easy"]["engine"].RetryRuns, c["easy"]["engine"].Retry = 0, RetryClientStats{}
		}, retryGoal, false, true},
		{"production-like client: raw data from before it", func(c map[string]map[string]*Cell) {
			for _, m := range c {
				for _, cell := range m {
					cell.RetryRuns, cell.Retry = 0, RetryClientStats{}
				}
			}
		}, retryGoal, false, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cells := good()
			if tt.mutate != nil {
				tt.mutate(cells)
			}
			g, ok := byName(evaluateTargets(meta, cells))[tt.goal]
			assert.True(t, ok, "goal %q not evaluated", tt.goal)
			assert.Equal(t, tt.unknown, g.Unknown, g.Detail)
			if !tt.unknown {
				assert.Equal(t, tt.met, g.Met, g.Detail)
			}
		})
	}
}

func TestRetryClientGoalDetail(t *testing.T) {
	meta := &Meta{Scenarios: []ScenarioMeta{{Name: "easy"}, {Name: "hung"}}}
	cells := map[string]map[string]*Cell{
		"easy": {"engine": {RetryRuns: 1, Retry: RetryClientStats{Writes: 98}}, "engine-cd0": {Runs: 1}},
		"hung": {"engine": {RetryRuns: 1, Retry: RetryClientStats{Writes: 90, FailedWrites: 2}}},
	}
	var g Goal
	for _, x := range evaluateTargets(meta, cells) {
		if x.Name == retryGoal {
			g = x
		}
	}
	assert.False(t, g.Met)
	assert.False(t, g.Unknown)
	assert.Equal(t, "easy/engine 0 of 98; hung/engine 2 of 90; not measured: easy/engine-cd0", g.Detail)
}
