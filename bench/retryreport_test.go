package main

import (
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
)

func TestCellAddsTheRetryingClient(t *testing.T) {
	var c Cell
	c.add(Rollout{Client: ClientStats{Writes: 100, FailedWrites: 2}})
	c.add(Rollout{Client: ClientStats{Writes: 100, FailedWrites: 1}, RetryClient: &RetryClientStats{Writes: 90, Attempts: 93,
		Retries: 3, RetriedWrites: 2, WorstToSuccess: 540 * time.Millisecond, AttemptErrors: map[string]int{"EOF": 3}}})
	c.add(Rollout{Client: ClientStats{Writes: 100}, RetryClient: &RetryClientStats{Writes: 95, FailedWrites: 1, Attempts: 105,
		Retries: 10, RetriedWrites: 1, WorstToSuccess: 20 * time.Millisecond, AttemptErrors: map[string]int{"EOF": 1}}})
	assert.Equal(t, 3, c.Runs)
	assert.Equal(t, 2, c.RetryRuns, "the rollout from before the retrying client is left out")
	assert.Equal(t, RetryClientStats{Writes: 185, FailedWrites: 1, Attempts: 198, Retries: 13, RetriedWrites: 3,
		WorstToSuccess: 540 * time.Millisecond, AttemptErrors: map[string]int{"EOF": 4}}, c.Retry)
	assert.Equal(t, 3, c.FailedWrites)
}

func TestRetryRow(t *testing.T) {
	tests := []struct {
		name string
		cell Cell
		want []string
	}{
		{"not measured: data from before the retrying client",
			Cell{Runs: 3, Writes: 300, FailedWrites: 4},
			[]string{"4 / 300", "not measured", "–", "–", "–"}},
		{"no retry needed",
			Cell{Runs: 2, RetryRuns: 2, Writes: 200, Retry: RetryClientStats{Writes: 190, Attempts: 190, WorstToSuccess: 12 * time.Millisecond}},
			[]string{"0 / 200", "**0** / 190", "0 (0)", "12", "–"}},
		{"failed writes on one client, retries on the other, errors most frequent first",
			Cell{Runs: 2, RetryRuns: 2, Writes: 200, FailedWrites: 9, Retry: RetryClientStats{Writes: 190, Attempts: 201, Retries: 11,
				RetriedWrites: 6, WorstToSuccess: 1234567 * time.Microsecond,
				AttemptErrors: map[string]int{"EOF": 2, "context deadline exceeded": 7, "connection reset": 2, "a|b": 1}}},
			[]string{"9 / 200", "**0** / 190", "11 (6)", "1235",
				"7 × `context deadline exceeded`, 2 × `EOF`, 2 × `connection reset`"}},
		{"a pipe in an error does not break the table",
			Cell{Runs: 1, RetryRuns: 1, Retry: RetryClientStats{Writes: 1, Attempts: 2, Retries: 1, RetriedWrites: 1,
				AttemptErrors: map[string]int{"a|b": 1}}},
			[]string{"0 / 0", "**0** / 1", "1 (1)", "0", "1 × `a\\|b`"}},
		{"a write lost for good, in only some rollouts measured",
			Cell{Runs: 4, RetryRuns: 3, Writes: 400, FailedWrites: 3, Retry: RetryClientStats{Writes: 300, FailedWrites: 1,
				Attempts: 320, Retries: 20, RetriedWrites: 2, WorstToSuccess: 600 * time.Millisecond}},
			[]string{"3 / 400", "**1** / 300 (3 of 4 rollouts)", "20 (2)", "600", "–"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			assert.Equal(t, tt.want, retryRow(&tt.cell))
		})
	}
}

func TestRetryClientTable(t *testing.T) {
	meta := &Meta{
		Scenarios:  []ScenarioMeta{{Name: "easy"}, {Name: "hung"}},
		Strategies: []StrategyMeta{{Name: "default"}, {Name: "engine"}},
	}
	cells := map[string]map[string]*Cell{
		"easy": {"engine": {Runs: 1, RetryRuns: 1, Writes: 100, Retry: RetryClientStats{Writes: 98, Attempts: 98}}},
		"hung": {
			"default": {Runs: 1, RetryRuns: 1, Writes: 100, FailedWrites: 5, Retry: RetryClientStats{Writes: 97, FailedWrites: 0,
				Attempts: 104, Retries: 7, RetriedWrites: 4, WorstToSuccess: 1500 * time.Millisecond}},
			"engine": {Runs: 1, RetryRuns: 1, Writes: 100, FailedWrites: 1, Retry: RetryClientStats{Writes: 98, Attempts: 99,
				Retries: 1, RetriedWrites: 1, WorstToSuccess: 30 * time.Millisecond, AttemptErrors: map[string]int{"EOF": 1}}},
		},
	}
	var b strings.Builder
	retryClientTable(&b, meta, cells)
	out := b.String()
	assert.Contains(t, out, "500 ms timeout per attempt")
	assert.Contains(t, out, "5 s have passed since the first")
	var rows []string
	for _, l := range strings.Split(out, "\n") {
		if strings.HasPrefix(l, "| ") && !strings.HasPrefix(l, "| scenario") {
			rows = append(rows, l)
		}
	}
	assert.Equal(t, []string{
		"| easy | engine | 0 / 100 | **0** / 98 | 0 (0) | 0 | – |",
		"| hung | default | 5 / 100 | **0** / 97 | 7 (4) | 1500 | – |",
		"| hung | engine | 1 / 100 | **0** / 98 | 1 (1) | 30 | 1 × `EOF` |",
	}, rows, "one row per scenario and strategy that ran, in the run's order")
}
