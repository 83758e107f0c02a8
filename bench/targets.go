package main

import (
	"fmt"
)

var engineStrategies = []string{"engine", "engine-cd0"}

// evaluateTargets judges issue #24's targets, then issue #14's and those of issue #6 that the later issues do
// not restate.
// A scenario or strategy the run lacks makes a target NOT MEASURED rather than met.
func evaluateTargets(cells map[string]map[string]*Cell) []Goal {
	cell := func(sc, st string) *Cell {
		if cells[sc] == nil {
			return nil
		}
		return cells[sc][st]
	}
	return []Goal{
		hardenedGoal(cell),
		tenClustersGoal(cell),
		apiRequestsGoal(cell),
		retryClientGoal(cell),
		electionsGoal(cell),
		quorumGoal(cell),
		transfersGoal(cell),
		oneMemberGoal(cell),
	}
}

// oneMemberGoal: the engine's roll of a one-member etcd (acceptWriteOutage, a snapshot first) stops writes
// no longer than the default roll's restart of the same member, the floor, plus a second (issue 34).
func oneMemberGoal(cell cellOf) Goal {
	var v verdict
	floor := cell("one-member", "default")
	engine := cell("one-member", "engine")
	switch {
	case floor == nil || len(floor.Gaps) == 0:
		v.miss("one-member/default")
	case engine == nil || len(engine.Gaps) == 0:
		v.miss("one-member/engine")
	default:
		e, d := mean(engine.Gaps), mean(floor.Gaps)
		v.add(fmt.Sprintf("engine %.0f ms, default %.0f ms (mean worst write gap)", e, d), e <= d+1000)
	}
	return v.goal("engine, one member: write outage ≤ the default roll's + 1 s (issue 34)", "")
}

// electionsGoal: 0 real elections by the engine in every scenario (issue #6, kept by issue #14).
func electionsGoal(cell cellOf) Goal {
	var v verdict
	eachEngineCell(&v, cell, benchScenarios(0), func(name string, c *Cell) {
		d := ""
		if c.Elections > 0 {
			d = fmt.Sprintf("%s: %d", name, c.Elections)
		}
		v.add(d, c.Elections == 0)
	})
	return v.goal("engine, every scenario: 0 real elections (issues #6, #14)",
		fmt.Sprintf("0 in all %d engine cells", v.measured))
}

// quorumGoal: the engine never loses quorum in any scenario (issue #6, kept by issue #14).
func quorumGoal(cell cellOf) Goal {
	var v verdict
	eachEngineCell(&v, cell, benchScenarios(0), func(name string, c *Cell) {
		d := ""
		if c.QuorumLossRuns > 0 {
			d = fmt.Sprintf("%s: %d rollouts, longest %.2f s", name, c.QuorumLossRuns, c.QuorumLostMax)
		}
		v.add(d, c.QuorumLossRuns == 0)
	})
	return v.goal("engine, every scenario: never a quorum loss (issues #6, #14)",
		fmt.Sprintf("0 rollouts with quorum lost in all %d engine cells", v.measured))
}

// transfersGoal: mean leader transfers per 3-member rollout, each starting ordinal weighed alike (issue #6,
// kept by issue #14).
func transfersGoal(cell cellOf) Goal {
	var v verdict
	eachEngineCell(&v, cell, benchScenarios(3), func(name string, c *Cell) {
		if len(c.TransfersByLeader) == 0 {
			v.miss(name)
			return
		}
		t := c.balancedTransfers()
		v.add(fmt.Sprintf("%s %.2f", name, t), t <= 1.34)
	})
	return v.goal("engine: mean leader transfers ≤ 1.34 per 3-member rollout (each starting ordinal weighed alike) (issues #6, #14)", "")
}
