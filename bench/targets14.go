package main

import (
	"fmt"
	"strings"
)

// The bounds of issues #14 and #24. Issue #14's 1.05× (the engine with cool-down 0 against the bare default
// roll) is retired by issue #24 (retiredTargets); its ten-cluster wall-time ratio is reported, no target.
const (
	hardenedBound       = 1.0   // engine-cd0 against default-hardened, easy and mtls (issue #24)
	tenClustersMaxRSSMB = 100.0 // issue #24 (issue #14 allowed 150); anonymous memory since issue 34
	cpuPerMemberBound   = 0.1   // engine CPU s per member rolled, ten clusters at once (issue #24)
	apiRequestsShare    = 5     // at most 1/5 of apiRequestsBefore
)

// retiredTargets are targets an earlier issue set that a later one withdrew, each with one line saying why,
// rather than a NOT MET forever.
var retiredTargets = []string{
	"engine with cool-down 0, easy scenario: wall time ≤ 1.05× the bare default roll's (issue #14): retired by issue #24. " +
		"It compared a roll that waits for etcd with one that waits for nothing and lost quorum in most easy rollouts; " +
		"nobody who cares about their etcd picks the bare default, so the engine is held against default-hardened instead.",
	"engine: 10 clusters rolled at once in ≤ 1.5× the time of one (issue #14): retired by issue #24 as a target on this " +
		"2-core machine (busy 98–100 % for every strategy, the bare default roll included); the ratio stays reported below.",
	"engine: no failed write in the heavy and hung-shutdown scenarios (single-connection client; issue #6): retired by " +
		"issue #31. It measures a client pinned to one connection to a member the rollout restarts, not the engine; " +
		"the retrying client, one connection per member, has 0 failed writes in every engine cell.",
	"engine: worst write gap in heavy and hung shutdown ≤ 0.2× the default's (issue #6): retired by issue #31, for the " +
		"same reason: the gap is the pinned client's wait on the member being restarted, not an outage of the cluster; " +
		"the retrying client's worst time to success is reported instead.",
	"engine: 10 clusters rolled at once by one process with peak RSS ≤ 100 MB, counting the binary's file-backed pages " +
		"(VmHWM; issue #24): restated by issue 34 for the memory the process holds. Since issue 34 the binary links the " +
		"AWS, Google Cloud and Azure SDKs (snapshot destinations), whose package initialisation touches about 20 MB of " +
		"the binary's pages in every process: reclaimable, shared by every process of the binary, and left out of what " +
		"Kubernetes counts (cAdvisor's container_memory_rss is anonymous memory; the working set leaves inactive files " +
		"out). The target now bounds the anonymous peak; the VmHWM stays reported next to it.",
}

// apiRequestsBefore is the engine's API-server requests per 3-member rollout before issue #14's work, a
// constant because no make bench run measured it: the count exists since 2af7742, and before the next run
// d1fe641 had already cut it to 180–185. It was read off tests/engine TestRollThreeMembersHTTP on the same
// local cluster (445–458 a rollout, as d1fe641's message records).
var apiRequestsBefore = struct {
	Mean, Min, Max float64
	Source         string
}{450, 445, 458, "tests/engine TestRollThreeMembersHTTP on this local cluster, as commit d1fe641's message records; 180–185 after that commit"}

// hardenedGoal: the engine with cool-down 0 against the default roll as a careful user hardens it, easy and
// mtls, with 0 real elections and no quorum loss of its own; default-hardened's own leader changes, elections
// and quorum losses are reported next to it, hung shutdown included (issue #24).
func hardenedGoal(cell cellOf) Goal {
	var v verdict
	for _, sc := range []string{"easy", "mtls"} {
		h, c := cell(sc, "default-hardened"), cell(sc, "engine-cd0")
		if h == nil {
			v.miss(sc + "/default-hardened")
		}
		if c == nil {
			v.miss(sc + "/engine-cd0")
		}
		if h == nil || c == nil {
			continue
		}
		ratio := mean(c.Wall) / mean(h.Wall)
		v.add(fmt.Sprintf("%s %.2f s vs %.2f s = %.2f×, %d elections, %d rollouts with quorum lost", sc,
			mean(c.Wall), mean(h.Wall), ratio, c.Elections, c.QuorumLossRuns), ratio <= hardenedBound && c.Elections == 0 && c.QuorumLossRuns == 0)
	}
	for _, sc := range []string{"easy", "mtls", "hung"} {
		if h := cell(sc, "default-hardened"); h != nil {
			v.detail = append(v.detail, fmt.Sprintf("(default-hardened, %s: per rollout %.2f planned, %.2f hand-over, %.2f elections; %d of %d rollouts lost quorum)",
				sc, h.Planned, h.Handover, h.Election, h.QuorumLossRuns, h.Runs))
		}
	}
	return v.goal(fmt.Sprintf("engine with cool-down 0, easy and mtls: wall time ≤ %.1f× default-hardened's, 0 real elections, no quorum loss (issue #24)", hardenedBound), "")
}

// tenClustersGoal: ten clusters rolled at once by one engine process: its peak RSS and its CPU per member
// rolled (issue #24). The wall-time ratio to one cluster is reported, no target (retiredTargets).
func tenClustersGoal(cell cellOf) Goal {
	var v verdict
	for _, st := range engineStrategies {
		many := cell("ten-clusters", st)
		if many == nil {
			v.miss("ten-clusters/" + st)
			continue
		}
		var parts []string
		ok := true
		if many.AnonRSSMB > 0 {
			parts = append(parts, fmt.Sprintf("peak RSS %.0f MB anonymous (VmHWM %.0f MB, file-backed up to %.0f MB)", many.AnonRSSMB, many.MaxRSSMB, many.FileRSSMB))
			ok = many.AnonRSSMB <= tenClustersMaxRSSMB
		} else {
			v.miss("ten-clusters/" + st + " peak anonymous RSS")
		}
		if len(many.CPUPerMember) > 0 {
			parts = append(parts, fmt.Sprintf("CPU %.3f s per member (max %.3f)", mean(many.CPUPerMember), maxOf(many.CPUPerMember)))
			ok = ok && mean(many.CPUPerMember) <= cpuPerMemberBound
		} else {
			v.miss("ten-clusters/" + st + " CPU")
		}
		if one := cell("easy", st); one != nil {
			parts = append(parts, fmt.Sprintf("wall %.2f s vs %.2f s for one cluster (easy) = %.2f×, no target", mean(many.Wall), mean(one.Wall), mean(many.Wall)/mean(one.Wall)))
		}
		if len(parts) > 0 {
			v.add(st+" "+strings.Join(parts, ", "), ok)
		}
	}
	if d1, dn := cell("easy", "default"), cell("ten-clusters", "default"); d1 != nil && dn != nil {
		v.detail = append(v.detail, fmt.Sprintf("(bare default roll for comparison: %.2f s vs %.2f s = %.2f×)",
			mean(dn.Wall), mean(d1.Wall), mean(dn.Wall)/mean(d1.Wall)))
	}
	return v.goal(fmt.Sprintf("engine: 10 clusters rolled at once by one process with peak anonymous RSS ≤ %.0f MB and CPU ≤ %.1f s per member rolled (issues #24, 34)",
		tenClustersMaxRSSMB, cpuPerMemberBound), "")
}

// apiRequestsGoal: the engine's mean API-server requests per 3-member cluster rollout, per cell, against
// 1/5 of apiRequestsBefore (issue #14). The detail states both numbers, as the issue asks. It counts the
// rollouts that restart members, as the 450 before did; a replacement (issue 32: remove, learner, promote,
// each pass a fresh look) is a procedure of its own, whose count the report gives next to the others, not
// held to this bound.
func apiRequestsGoal(cell cellOf) Goal {
	b := apiRequestsBefore
	bound := b.Mean / apiRequestsShare
	var v verdict
	v.detail = []string{fmt.Sprintf("before issue #14: %.0f–%.0f per 3-member rollout, mean %.0f (%s), so at most %.0f", b.Min, b.Max, b.Mean, b.Source, bound)}
	eachEngineCell(&v, cell, restartScenarios(3), func(name string, c *Cell) {
		if len(c.APIRequests) == 0 {
			v.miss(name)
			return
		}
		m := mean(c.APIRequests)
		v.add(fmt.Sprintf("%s %.0f (max %.0f) = %.2f× before", name, m, maxOf(c.APIRequests), m/b.Mean), m <= bound)
	})
	return v.goal(fmt.Sprintf("engine: API-server requests per 3-member rollout ≤ %.0f, 1/%d of the %.0f before issue #14 (issue #14)",
		bound, apiRequestsShare, b.Mean), "")
}

// retryClientGoal: the production-like (retrying) client loses no write to the engine in any scenario, hung
// shutdown included (issue #14).
func retryClientGoal(cell cellOf) Goal {
	var v verdict
	eachEngineCell(&v, cell, benchScenarios(0), func(name string, c *Cell) {
		if c.RetryRuns == 0 {
			v.miss(name)
			return
		}
		v.add(fmt.Sprintf("%s %d of %d", name, c.Retry.FailedWrites, c.Retry.Writes), c.Retry.FailedWrites == 0)
	})
	return v.goal("engine, every scenario, hung shutdown included: 0 failed writes for the production-like (retrying) client (issue #14)", "")
}
