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
	}
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
