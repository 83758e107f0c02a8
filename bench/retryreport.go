package main

import (
	"fmt"
	"strings"
	"time"
)

// addRetry adds one rollout's retrying client to the cell; rollouts from before the retrying client (nil)
// are left out, and RetryRuns says how many had one.
func (c *Cell) addRetry(rc *RetryClientStats) {
	if rc == nil {
		return
	}
	c.RetryRuns++
	c.Retry.Writes += rc.Writes
	c.Retry.FailedWrites += rc.FailedWrites
	c.Retry.Attempts += rc.Attempts
	c.Retry.Retries += rc.Retries
	c.Retry.RetriedWrites += rc.RetriedWrites
	c.Retry.WorstToSuccess = max(c.Retry.WorstToSuccess, rc.WorstToSuccess)
	for k, v := range rc.AttemptErrors {
		if c.Retry.AttemptErrors == nil {
			c.Retry.AttemptErrors = map[string]int{}
		}
		c.Retry.AttemptErrors[k] += v
	}
}

// retryClientTable reports, per scenario and strategy, the production-like client's writes next to today's
// single-connection client's: what an application with an ordinary retry loop would have lost.
func retryClientTable(b *strings.Builder, meta *Meta, cells map[string]map[string]*Cell) {
	p := func(format string, args ...any) { fmt.Fprintf(b, format, args...) }
	pol := defaultRetryPolicy
	p("\nWrites as a production-like client sees them, next to the single-connection client above (its failed writes / writes again). A second background client runs alongside it over the same window, to its own key: one etcd v3 Go client per member (every member an endpoint), a put every %s with a %d ms timeout per attempt; a failed attempt is sent again, unchanged (same key and value), to the next member after %d ms, until one succeeds or %.0f s have passed since the first; it stays on the member that last succeeded. A write fails only when no attempt succeeded within %.0f s. *Retries*: attempts after a write's first (in parentheses: the writes that needed any); *worst time to success*: first attempt to success, worst successful write.\n\n",
		"10 ms (20 ms in ten-clusters)", pol.AttemptTimeout.Milliseconds(), pol.Backoff.Milliseconds(), pol.Deadline.Seconds(), pol.Deadline.Seconds())
	p("| scenario | strategy | single-connection client: failed writes / writes | production-like client: failed writes / writes | retries (writes retried) | worst time to success ms | failed attempts by error |\n")
	p("|---|---|---|---|---|---|---|\n")
	for _, sc := range meta.Scenarios {
		for _, s := range strategyOrder(meta) {
			c := cells[sc.Name][s]
			if c == nil {
				continue
			}
			p("| %s | %s | %s |\n", sc.Name, s, strings.Join(retryRow(c), " | "))
		}
	}
}

// retryRow is a cell's columns after scenario and strategy.
func retryRow(c *Cell) []string {
	single := fmt.Sprintf("%d / %d", c.FailedWrites, c.Writes)
	if c.RetryRuns == 0 {
		return []string{single, "not measured", "–", "–", "–"}
	}
	r := c.Retry
	prod := fmt.Sprintf("**%d** / %d", r.FailedWrites, r.Writes)
	if c.RetryRuns < c.Runs {
		prod += fmt.Sprintf(" (%d of %d rollouts)", c.RetryRuns, c.Runs)
	}
	errs := strings.ReplaceAll(strings.Join(topErrors(r.AttemptErrors, 3), ", "), "|", `\|`)
	if errs == "" {
		errs = "–"
	}
	return []string{single, prod, fmt.Sprintf("%d (%d)", r.Retries, r.RetriedWrites),
		fmt.Sprintf("%.0f", ms(r.WorstToSuccess.Round(time.Millisecond))), errs}
}
