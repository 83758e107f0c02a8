package main

import (
	"fmt"
	"strings"
)

// Goal is one of the targets, judged against the numbers of a run (reported, never asserted).
type Goal struct {
	Name    string
	Met     bool
	Unknown bool
	Detail  string
}

var engineStrategies = []string{"engine", "engine-cd0"}

// evaluateTargets judges issue #6's targets. Scenarios or strategies missing from the run make a target
// NOT MEASURED rather than met.
func evaluateTargets(meta *Meta, cells map[string]map[string]*Cell) []Goal {
	var out []Goal
	cell := func(sc, st string) *Cell {
		if cells[sc] == nil {
			return nil
		}
		return cells[sc][st]
	}

	// 0 real elections and no quorum loss, engine, every scenario.
	elections, lost := Goal{Name: "engine, every scenario: 0 real elections", Met: true},
		Goal{Name: "engine, every scenario: never a quorum loss", Met: true}
	var eDetail, qDetail []string
	n := 0
	for _, sc := range meta.Scenarios {
		for _, st := range engineStrategies {
			c := cell(sc.Name, st)
			if c == nil {
				continue
			}
			n++
			if c.Elections > 0 {
				elections.Met = false
				eDetail = append(eDetail, fmt.Sprintf("%s/%s: %d", sc.Name, st, c.Elections))
			}
			if c.QuorumLossRuns > 0 {
				lost.Met = false
				qDetail = append(qDetail, fmt.Sprintf("%s/%s: %d rollouts, longest %.2f s", sc.Name, st, c.QuorumLossRuns, c.QuorumLostMax))
			}
		}
	}
	elections.Unknown, lost.Unknown = n == 0, n == 0
	elections.Detail = orAll(eDetail, fmt.Sprintf("0 in all %d engine cells", n))
	lost.Detail = orAll(qDetail, fmt.Sprintf("0 rollouts with quorum lost in all %d engine cells", n))
	out = append(out, elections, lost)

	// No failed write in heavy and hung.
	fw := Goal{Name: "engine: no failed write in the heavy and hung-shutdown scenarios", Met: true}
	var fwDetail []string
	found := false
	for _, sc := range []string{"heavy-immediate", "heavy-probe", "hung"} {
		for _, st := range engineStrategies {
			if c := cell(sc, st); c != nil {
				found = true
				fwDetail = append(fwDetail, fmt.Sprintf("%s/%s %d of %d", sc, st, c.FailedWrites, c.Writes))
				if c.FailedWrites > 0 {
					fw.Met = false
				}
			}
		}
	}
	fw.Unknown, fw.Detail = !found, strings.Join(fwDetail, "; ")
	out = append(out, fw)

	out = append(out, retryClientGoal(meta, cell))

	// Mean transfers per 3-member rollout.
	tr := Goal{Name: "engine: mean leader transfers ≤ 1.34 per 3-member rollout (each starting ordinal weighed alike)", Met: true}
	var trDetail []string
	found = false
	for _, sc := range meta.Scenarios {
		if sc.Replicas != 3 {
			continue
		}
		for _, st := range engineStrategies {
			if c := cell(sc.Name, st); c != nil {
				found = true
				t := c.balancedTransfers()
				trDetail = append(trDetail, fmt.Sprintf("%s/%s %.2f", sc.Name, st, t))
				if t > 1.34 {
					tr.Met = false
				}
			}
		}
	}
	tr.Unknown, tr.Detail = !found, strings.Join(trDetail, "; ")
	out = append(out, tr)

	// Worst write gap vs the default's.
	gap := Goal{Name: "engine: worst write gap in heavy and hung shutdown ≤ 0.2× the default's", Met: true}
	var gDetail []string
	found = false
	for _, sc := range []string{"heavy-immediate", "heavy-probe", "hung"} {
		d := cell(sc, "default")
		if d == nil {
			continue
		}
		for _, st := range engineStrategies {
			if c := cell(sc, st); c != nil {
				found = true
				ratio := maxOf(c.Gaps) / maxOf(d.Gaps)
				gDetail = append(gDetail, fmt.Sprintf("%s/%s %.0f ms vs %.0f ms = %.2f×", sc, st, maxOf(c.Gaps), maxOf(d.Gaps), ratio))
				if ratio > 0.2 {
					gap.Met = false
				}
			}
		}
	}
	gap.Unknown, gap.Detail = !found, strings.Join(gDetail, "; ")
	out = append(out, gap)

	// Wall time of cool-down 0 in the easy scenario.
	wall := Goal{Name: "engine with cool-down 0, easy scenario: wall time ≤ 1.2× the default's"}
	if d, c := cell("easy", "default"), cell("easy", "engine-cd0"); d != nil && c != nil {
		ratio := mean(c.Wall) / mean(d.Wall)
		wall.Met = ratio <= 1.2
		wall.Detail = fmt.Sprintf("%.2f s vs %.2f s = %.2f×", mean(c.Wall), mean(d.Wall), ratio)
	} else {
		wall.Unknown = true
	}
	out = append(out, wall)

	// Ten clusters vs one.
	ten := Goal{Name: "engine: 10 clusters rolled at once in ≤ 1.5× the time of one"}
	var tDetail []string
	found = false
	ten.Met = true
	for _, st := range engineStrategies {
		one, many := cell("easy", st), cell("ten-clusters", st)
		if one == nil || many == nil {
			continue
		}
		found = true
		ratio := mean(many.Wall) / mean(one.Wall)
		tDetail = append(tDetail, fmt.Sprintf("%s %.2f s vs %.2f s (easy) = %.2f×", st, mean(many.Wall), mean(one.Wall), ratio))
		if ratio > 1.5 {
			ten.Met = false
		}
	}
	if d1, dn := cell("easy", "default"), cell("ten-clusters", "default"); d1 != nil && dn != nil {
		tDetail = append(tDetail, fmt.Sprintf("(default roll for comparison: %.2f s vs %.2f s = %.2f×)", mean(dn.Wall), mean(d1.Wall), mean(dn.Wall)/mean(d1.Wall)))
	}
	ten.Unknown, ten.Detail = !found, strings.Join(tDetail, "; ")
	out = append(out, ten)
	return out
}

func orAll(details []string, none string) string {
	if len(details) == 0 {
		return none
	}
	return strings.Join(details, "; ")
}

// retryClientGoal judges issue #14's target for the production-like client: no write lost by the engine in
// any scenario. An engine cell without that client's data makes it NOT MEASURED unless another already
// failed it.
func retryClientGoal(meta *Meta, cell func(sc, st string) *Cell) Goal {
	g := Goal{Name: "engine, every scenario, hung shutdown included: 0 failed writes for the production-like (retrying) client (issue #14)", Met: true}
	var detail, missing []string
	measured := 0
	for _, sc := range meta.Scenarios {
		for _, st := range engineStrategies {
			c := cell(sc.Name, st)
			if c == nil {
				continue
			}
			if c.RetryRuns == 0 {
				missing = append(missing, sc.Name+"/"+st)
				continue
			}
			measured++
			detail = append(detail, fmt.Sprintf("%s/%s %d of %d", sc.Name, st, c.Retry.FailedWrites, c.Retry.Writes))
			if c.Retry.FailedWrites > 0 {
				g.Met = false
			}
		}
	}
	if len(missing) > 0 {
		detail = append(detail, "not measured: "+strings.Join(missing, ", "))
	}
	g.Unknown = g.Met && (measured == 0 || len(missing) > 0)
	g.Detail = orAll(detail, "no engine cell")
	return g
}
