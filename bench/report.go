package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"github.com/etcd-rollout/pulumi-etcd-rollout/bench/engineroll"
	"github.com/etcd-rollout/pulumi-etcd-rollout/rollout"
)

// Cell aggregates the rollouts of one strategy in one scenario. Leader-change counts are per cluster
// rollout (the ten-clusters scenario rolls ten clusters per rollout).
type Cell struct {
	Scenario, Strategy string
	Runs, Errors       int
	ClusterRolls       int
	Wall               []float64 // s
	Planned            float64   // mean per cluster rollout
	Handover, Election float64
	Elections          int // total real elections
	DeltaTerm          float64
	TermOK, MetricOK   int
	QuorumLossRuns     int
	QuorumLostMax      float64 // s
	FailedWrites       int
	Writes             int
	FailedReads        int
	Gaps               []float64 // worst gap per rollout, ms
	P99                []float64 // ms
	DownPerMember      []float64 // s, one per member restart
	Startups           []float64 // s
	MaxRSSMB           float64
	// AnonRSSMB and FileRSSMB are the largest anonymous and file-backed parts of that peak, sampled.
	AnonRSSMB, FileRSSMB float64
	WriteErrors          map[string]int
	// TransfersByLeader lists, per ordinal the leader started on, the transfers (planned + hand-over) of
	// each cluster rollout: the target's mean weighs every starting ordinal alike, whatever the run count.
	TransfersByLeader map[int][]float64
	// ReadyAfter and GateAfter split the engine's time per member: partition lowered → pod Ready, then →
	// etcd's health gate passed (from the engine's own progress events).
	ReadyAfter, GateAfter []float64
	// APIRequests is, per cluster rollout an engine ran, the requests it sent to the API server.
	APIRequests []float64
	// WriteOutages is, per one-member rollout an engine ran, the write outage it measured itself (s).
	WriteOutages []float64
	// TrustProbes, TrustMs and TrustRequests are, per member an engine rolled, what its TLS trust checks
	// cost (issue 33): members' ports probed, milliseconds, API requests.
	TrustProbes, TrustMs, TrustRequests []float64
	// SnapshotSteps are, per cluster rollout whose engine took a snapshot before its first restart, that
	// step's seconds (transfer, checks, store, read back: the engine's EventSnapshotStored), SnapshotShares
	// the step's share of the cluster's roll, and SnapshotMB the snapshots' sizes.
	SnapshotSteps, SnapshotShares, SnapshotMB []float64
	// Retry sums the retrying (production-like) client over the rollouts that had one; RetryRuns counts them.
	Retry     RetryClientStats
	RetryRuns int
	// CPUPerCluster and CPUPerMember are the engine process's CPU seconds (user + system) per rollout,
	// divided by the clusters it rolled and by the members they rolled.
	CPUPerCluster, CPUPerMember []float64
	// PeakGoMemory is the engine process's Go runtime memory at the largest of its rollouts.
	PeakGoMemory goMemory
}

// goMemory is engineroll.GoMemory, described for the cost table.
type goMemory engineroll.GoMemory

func (m goMemory) describe() string {
	if m.Mapped == 0 {
		return "–"
	}
	mb := func(kb uint64) float64 { return float64(kb) / 1024 }
	return fmt.Sprintf("%.0f: heap %.0f in use + %.0f free, stacks %.0f (%d goroutines)",
		mb(m.Mapped), mb(m.HeapInuse), mb(m.HeapIdle), mb(m.StackInuse), m.Goroutines)
}

// addGateTimes adds, for every member the engine rolled, how long its pod took to turn Ready and how long
// its etcd gate took after that, from the engine's typed member events.
func (c *Cell) addGateTimes(events []TimedEvent) {
	ready := map[string]time.Duration{}
	for _, ev := range events {
		switch ev.Kind {
		case rollout.EventMemberReady:
			ready[ev.Pod] = ev.Elapsed
			c.ReadyAfter = append(c.ReadyAfter, ev.Elapsed.Seconds())
		case rollout.EventMemberRolled:
			if r, ok := ready[ev.Pod]; ok {
				c.GateAfter = append(c.GateAfter, (ev.Elapsed - r).Seconds())
			}
			delete(ready, ev.Pod)
		}
	}
}

// addCPU adds the engine process's CPU time of a rollout, per cluster and per member rolled.
func (c *Cell) addCPU(r Rollout) {
	if r.EngineCPU <= 0 || len(r.Clusters) == 0 {
		return
	}
	members := 0
	for _, cr := range r.Clusters {
		if cr.Engine != nil {
			members += len(cr.Engine.Result.MembersRolled)
		}
	}
	c.CPUPerCluster = append(c.CPUPerCluster, r.EngineCPU.Seconds()/float64(len(r.Clusters)))
	if members > 0 {
		c.CPUPerMember = append(c.CPUPerMember, r.EngineCPU.Seconds()/float64(members))
	}
}

// balancedTransfers is the mean of the per-starting-ordinal means.
func (c *Cell) balancedTransfers() float64 {
	var means []float64
	for _, xs := range c.TransfersByLeader {
		means = append(means, mean(xs))
	}
	return mean(means)
}

func (c *Cell) add(r Rollout) {
	c.Runs++
	if r.Err != "" {
		c.Errors++
	}
	c.Wall = append(c.Wall, r.Wall.Seconds())
	c.FailedWrites += r.Client.FailedWrites
	for k, v := range r.Client.WriteErrors {
		if c.WriteErrors == nil {
			c.WriteErrors = map[string]int{}
		}
		c.WriteErrors[k] += v
	}
	c.FailedReads += r.Client.FailedReads
	c.Writes += r.Client.Writes
	c.Gaps = append(c.Gaps, ms(r.Client.WorstGap))
	c.P99 = append(c.P99, ms(r.Client.P99Write))
	if !r.Profiled { // profiling costs CPU and memory of its own: not the engine's
		c.MaxRSSMB = max(c.MaxRSSMB, float64(r.MaxRSSKB)/1024)
		c.AnonRSSMB, c.FileRSSMB = max(c.AnonRSSMB, float64(r.PeakRSS.AnonKB)/1024), max(c.FileRSSMB, float64(r.PeakRSS.FileKB)/1024)
		if r.GoMemory != nil && r.GoMemory.Mapped > c.PeakGoMemory.Mapped {
			c.PeakGoMemory = goMemory(*r.GoMemory)
		}
		c.addCPU(r)
	}
	c.addRetry(r.RetryClient)
	lost := false
	for i, cr := range r.Clusters {
		c.ClusterRolls++
		if c.TransfersByLeader == nil {
			c.TransfersByLeader = map[int][]float64{}
		}
		if i < len(r.LeaderStart) {
			l := r.LeaderStart[i]
			c.TransfersByLeader[l] = append(c.TransfersByLeader[l], float64(cr.Raft.Count(ChangePlanned)+cr.Raft.Count(ChangeHandover)))
		}
		if cr.Engine != nil {
			if n := cr.Engine.Result.APIRequests; n > 0 {
				c.APIRequests = append(c.APIRequests, float64(n))
			}
			if o := cr.Engine.Result.WriteOutage; o != nil {
				c.WriteOutages = append(c.WriteOutages, o.Duration.Seconds())
			}
			c.addTrustCost(cr.Engine.Result)
			c.addSnapshotStep(cr.Engine.Result, cr.Engine.Events)
			c.addGateTimes(cr.Engine.Events)
		}
		c.Planned += float64(cr.Raft.Count(ChangePlanned))
		c.Handover += float64(cr.Raft.Count(ChangeHandover))
		e := cr.Raft.Count(ChangeElection)
		c.Election += float64(e)
		c.Elections += e
		c.DeltaTerm += float64(cr.TermAfter - cr.TermBefore)
		if cr.TermCheck() {
			c.TermOK++
		}
		if cr.MetricCheck {
			c.MetricOK++
		}
		if d := cr.Avail.QuorumLostFor(); d > 0 {
			lost = true
			c.QuorumLostMax = max(c.QuorumLostMax, d.Seconds())
		}
		for _, d := range cr.Avail.DownFor() {
			c.DownPerMember = append(c.DownPerMember, d.Seconds())
		}
		for _, s := range cr.Startups {
			c.Startups = append(c.Startups, s.Took.Seconds())
		}
	}
	if lost {
		c.QuorumLossRuns++
	}
}

func (c *Cell) finish() {
	if n := float64(c.ClusterRolls); n > 0 {
		c.Planned /= n
		c.Handover /= n
		c.Election /= n
		c.DeltaTerm /= n
	}
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

func mean(xs []float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	s := 0.0
	for _, x := range xs {
		s += x
	}
	return s / float64(len(xs))
}

func maxOf(xs []float64) float64 {
	m := 0.0
	for _, x := range xs {
		m = max(m, x)
	}
	return m
}

func minOf(xs []float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	m := xs[0]
	for _, x := range xs {
		m = min(m, x)
	}
	return m
}

func median(xs []float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	s := append([]float64(nil), xs...)
	sort.Float64s(s)
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

// readRollouts reads the raw data of a run.
func readRollouts(outDir string) (*Meta, []Rollout, error) {
	var meta Meta
	b, err := os.ReadFile(filepath.Join(outDir, "meta.json"))
	if err != nil {
		return nil, nil, fmt.Errorf("reading the run's meta data: %w", err)
	}
	if err := json.Unmarshal(b, &meta); err != nil {
		return nil, nil, fmt.Errorf("decoding meta.json: %w", err)
	}
	f, err := os.Open(filepath.Join(outDir, "rollouts.jsonl"))
	if err != nil {
		return nil, nil, err
	}
	defer f.Close()
	var rs []Rollout
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 0, 1<<20), 256<<20)
	for sc.Scan() {
		var r Rollout
		if err := json.Unmarshal(sc.Bytes(), &r); err != nil {
			return nil, nil, fmt.Errorf("decoding rollouts.jsonl: %w", err)
		}
		rs = append(rs, r)
	}
	return &meta, rs, sc.Err()
}

// writeReport writes results.md and one PNG per scenario next to it.
func writeReport(outDir, results string) error {
	meta, rs, err := readRollouts(outDir)
	if err != nil {
		return err
	}
	cells := map[string]map[string]*Cell{}
	for _, r := range rs {
		if cells[r.Scenario] == nil {
			cells[r.Scenario] = map[string]*Cell{}
		}
		c := cells[r.Scenario][r.Strategy]
		if c == nil {
			c = &Cell{Scenario: r.Scenario, Strategy: r.Strategy}
			cells[r.Scenario][r.Strategy] = c
		}
		c.add(r)
	}
	for _, m := range cells {
		for _, c := range m {
			c.finish()
		}
	}
	dir := filepath.Dir(results)
	var plots []string
	for _, sc := range meta.Scenarios {
		if cells[sc.Name] == nil {
			continue
		}
		name := "bench-" + sc.Name + ".png"
		if err := plotScenario(filepath.Join(dir, name), sc, meta, rs); err != nil {
			return fmt.Errorf("plotting %s: %w", sc.Name, err)
		}
		plots = append(plots, name)
	}
	md := renderMarkdown(meta, cells, plots)
	return os.WriteFile(results, []byte(md), 0o644)
}

// renderMarkdown writes results.md: what ran where, the scenarios, the tables, the targets and the plots.
func renderMarkdown(meta *Meta, cells map[string]map[string]*Cell, plots []string) string {
	var b strings.Builder
	writeHeader(&b, meta)
	writeSetup(&b, meta, cells)
	writeResults(&b, meta, cells)
	fmt.Fprintf(&b, "\n%s\n", howMeasured)
	retryClientTable(&b, meta, cells)
	extras(&b, meta, cells)
	writeTargets(&b, meta, cells)
	writePlots(&b, plots)
	return b.String()
}

// writeHeader says what ran, where and how completely: a partial run and overridden defaults come first.
func writeHeader(b *strings.Builder, meta *Meta) {
	p := func(format string, args ...any) { fmt.Fprintf(b, format, args...) }
	partial := len(meta.Done) < len(meta.Scenarios) || len(meta.Failed) > 0
	p("# Benchmark: rolling etcd with the default StatefulSet roll, the old Job's policy, and the engine\n\n")
	if partial {
		p("**PARTIAL RESULTS: the run did not finish everything it planned** (scenarios done: %s, of %d planned; see below).\n\n",
			strings.Join(meta.Done, ", "), len(meta.Scenarios))
	}
	for _, f := range meta.Failed {
		p("**Cut short:** %s\n\n", f)
	}
	if w := overriddenWindow(meta); w != "" {
		p("**NOT THE ENGINE'S DEFAULTS: the canary's stability window was set to %s (`-stable-for`), to measure what it costs. No target below counts.**\n\n", w)
	}
	p("Generated by `make bench` (`bench/run.sh`) on %s, commit %s. Raw data: `bench/out/` (not committed).\n\n",
		meta.Date.Format("2006-01-02 15:04 UTC"), meta.Commit)
	p("Machine: %s, %d cores, %.0f GB RAM, load average %s at start; Kubernetes %s (real kube-apiserver and StatefulSet controller, kwok node), etcd %s (real processes, heartbeat 100 ms, election timeout 1 s, pre-vote on, fsync off), %s. Command line: `%s`.\n\n",
		meta.CPU, meta.Cores, meta.MemoryGB, meta.LoadAvg, meta.Kubernetes, meta.Etcd, meta.Go, meta.CommandLine)
}

// writeSetup lists the strategies and the scenarios as they ran.
func writeSetup(b *strings.Builder, meta *Meta, cells map[string]map[string]*Cell) {
	p := func(format string, args ...any) { fmt.Fprintf(b, format, args...) }
	p("## Strategies\n\n")
	for _, s := range meta.Strategies {
		p("- **%s**: %s\n", s.Name, s.About)
	}
	p("\n## Scenarios\n\n")
	for _, s := range meta.Scenarios {
		done := 0
		for _, c := range cells[s.Name] {
			done = max(done, c.Runs)
		}
		p("- **%s** (%d rollouts per strategy", s.Name, done)
		if done != s.Runs {
			p(" of %d planned", s.Runs)
		}
		p(", %d member(s) × %d cluster(s)): %s", s.Replicas, s.Clusters, s.Title)
		if f := meta.Facts[s.Name]; len(f) > 0 {
			var keys []string
			for k := range f {
				keys = append(keys, k)
			}
			sort.Strings(keys)
			var kv []string
			for _, k := range keys {
				kv = append(kv, k+": "+f[k])
			}
			p(". Setup: %s", strings.Join(kv, "; "))
		}
		if t := meta.Took[s.Name]; t != "" {
			p(". Scenario took %s", t)
		}
		p(".\n")
	}
	p("\nEvery rollout: a new pod template, the leader first placed on ordinal (run + cluster) mod N (so each ordinal in turn), a background client (etcd v3 Go client, one connection to all members, a put every %s with a 500 ms timeout and no retry of ours, and a linearizable get likewise) from %s before the roll to %s after; strategies take turns within each run (their order rotates from run to run).\n\n", "10 ms (20 ms in ten-clusters)", loadMargin, loadMargin)
}

// writeResults writes the summary table and the table of all measurements.
func writeResults(b *strings.Builder, meta *Meta, cells map[string]map[string]*Cell) {
	p := func(format string, args ...any) { fmt.Fprintf(b, format, args...) }
	p("## Results\n\n")
	p("Each cell: **worst write gap** (ms, worst rollout) / failed writes (all rollouts) / real elections (all rollouts) / rollouts that lost quorum / mean wall time (s).\n\n")
	strats := strategyOrder(meta)
	p("| scenario (rollouts per strategy) |")
	for _, s := range strats {
		p(" %s |", s)
	}
	p("\n|---|")
	for range strats {
		p("---|")
	}
	p("\n")
	for _, sc := range meta.Scenarios {
		if cells[sc.Name] == nil {
			continue
		}
		runs := 0
		for _, c := range cells[sc.Name] {
			runs = max(runs, c.Runs)
		}
		p("| %s (%d) |", sc.Name, runs)
		for _, s := range strats {
			c := cells[sc.Name][s]
			if c == nil {
				p(" – |")
				continue
			}
			p(" **%.0f** / %d / %d / %d / %.1f |", maxOf(c.Gaps), c.FailedWrites, c.Elections, c.QuorumLossRuns, mean(c.Wall))
		}
		p("\n")
	}
	p("\nAll measurements, per scenario and strategy:\n\n")
	p("| scenario | strategy | rollouts (errors) | wall s mean (min–max) | leader changes per roll: planned / hand-over / election | Δ raft term | quorum lost: rollouts, longest s | failed writes / writes | worst write gap ms: max, median | p99 write ms: mean, max | member down s: mean, max | log checks: term, metric |\n")
	p("|---|---|---|---|---|---|---|---|---|---|---|---|\n")
	for _, sc := range meta.Scenarios {
		for _, s := range strats {
			c := cells[sc.Name][s]
			if c == nil {
				continue
			}
			p("| %s | %s | %d (%d) | %.1f (%.1f–%.1f) | %.2f / %.2f / %.2f | %.2f | %d, %.2f | %d / %d | %.0f, %.0f | %.0f, %.0f | %.2f, %.2f | %d/%d, %d/%d |\n",
				sc.Name, s, c.Runs, c.Errors, mean(c.Wall), minOf(c.Wall), maxOf(c.Wall),
				c.Planned, c.Handover, c.Election, c.DeltaTerm, c.QuorumLossRuns, c.QuorumLostMax,
				c.FailedWrites, c.Writes, maxOf(c.Gaps), median(c.Gaps), mean(c.P99), maxOf(c.P99),
				mean(c.DownPerMember), maxOf(c.DownPerMember), c.TermOK, c.ClusterRolls, c.MetricOK, c.ClusterRolls)
		}
	}
}

// writeTargets reports each target as met, not met or not measured: reported, never asserted.
func writeTargets(b *strings.Builder, meta *Meta, cells map[string]map[string]*Cell) {
	p := func(format string, args ...any) { fmt.Fprintf(b, format, args...) }
	p("\n## Targets (issues #24, #14 and #6)\n\n")
	p("Reported, not asserted. A target whose data this run lacks (a scenario not run, a number not recorded) is NOT MEASURED, never met.\n\n")
	overridden := overriddenWindow(meta) != ""
	for _, t := range evaluateTargets(cells) {
		mark := "MET"
		if !t.Met {
			mark = "NOT MET"
		}
		if t.Unknown {
			mark = "NOT MEASURED"
		}
		if overridden {
			mark = "NOT COUNTED (stability window overridden)"
		}
		p("- **%s**: %s — %s\n", mark, t.Name, t.Detail)
	}
	for _, r := range retiredTargets {
		p("- **RETIRED**: %s\n", r)
	}
}

// writePlots links the plots, one per scenario.
func writePlots(b *strings.Builder, plots []string) {
	p := func(format string, args ...any) { fmt.Fprintf(b, format, args...) }
	if len(plots) > 0 {
		p("\n## Plots\n\nWrite latency of the background client over one rollout per strategy (the run with the leader first on the last ordinal, the first member every strategy restarts); failed writes at the top in red; shaded: a member out (process stopped or not yet answering /livez); vertical lines: leader changes (blue planned, green hand-over on SIGTERM, red election).\n\n")
		for _, name := range plots {
			p("![%s](%s)\n\n", strings.TrimSuffix(name, ".png"), name)
		}
	}
}

const howMeasured = `How each column is measured:
- **leader changes**: every term won, read from the members' own logs (zap JSON): a winner that logged ` + "`received MsgTimeoutNow`" + ` for that term took over by a transfer — *planned* when the old leader sent it through the MoveLeader API, *hand-over* when the old leader had just logged ` + "`received signal; shutting down`" + ` (etcd's own transfer on SIGTERM); any other winner campaigned (pre-candidate, candidate) because it stopped hearing from a leader: a real *election*.
- **log checks**: *term*: the raft term (Status RPC) rose by exactly the number of terms the logs show a campaign in; *metric*: each member's ` + "`etcd_server_leader_changes_seen_total`" + ` equals the leader changes its current process logged. x/y = cluster rollouts that passed.
- **quorum lost**: a member counts as out from its process's SIGTERM (or, if it ignores SIGTERM, its SIGKILL) until its next process answers ` + "`/livez`" + ` (etcd serves it once its server runs, so a member still loading its database is out); sampled every 50 ms (100 ms with ten clusters); quorum is lost while fewer than a majority are in.
- **wall**: from the roll's start (partition lowered, or the engine's Run) until every pod is at the update revision and etcd is healthy (the default roll: ` + "`harness.WaitRolledOut`" + `, polled every 50 ms).
- **worst write gap**: the longest time between two successful puts' completions (from the client's start, to its stop); **failed writes**: puts that failed or timed out (500 ms); p99 over successful puts.`

// strategyOrder lists strategies as the run defined them.
func strategyOrder(meta *Meta) []string {
	var out []string
	for _, s := range meta.Strategies {
		out = append(out, s.Name)
	}
	return out
}

// extras reports the numbers only some scenarios have: restart times, peak RSS.
func extras(b *strings.Builder, meta *Meta, cells map[string]map[string]*Cell) {
	p := func(format string, args ...any) { fmt.Fprintf(b, format, args...) }
	p("\nMember restart (process start to /livez), mean over every restart of every strategy:")
	for _, sc := range meta.Scenarios {
		var all []float64
		for _, c := range cells[sc.Name] {
			all = append(all, c.Startups...)
		}
		if len(all) > 0 {
			p(" %s %.2f s (max %.2f s);", sc.Name, mean(all), maxOf(all))
		}
	}
	p("\n")
	p("\nWhere the engine's time per member goes (mean s: partition lowered → pod Ready at the new revision, then → etcd's health gate passed, from the engine's own progress events):")
	for _, sc := range meta.Scenarios {
		for _, st := range strategyOrder(meta) {
			if c := cells[sc.Name][st]; c != nil && len(c.ReadyAfter) > 0 {
				p(" %s/%s %.2f + %.2f;", sc.Name, st, mean(c.ReadyAfter), mean(c.GateAfter))
			}
		}
	}
	p("\n")
	p("\nAPI-server requests per cluster rollout by an engine (its own count: reads, writes, Lease, Events, watches, port-forward upgrades), mean (max); before issue #14 a 3-member rollout made %.0f–%.0f (%s):",
		apiRequestsBefore.Min, apiRequestsBefore.Max, apiRequestsBefore.Source)
	for _, sc := range meta.Scenarios {
		for _, st := range strategyOrder(meta) {
			if c := cells[sc.Name][st]; c != nil && len(c.APIRequests) > 0 {
				p(" %s/%s %.0f (%.0f);", sc.Name, st, mean(c.APIRequests), maxOf(c.APIRequests))
			}
		}
	}
	p("\n")
	trustCosts(b, meta, cells)
	snapshotSteps(b, meta, cells)
	outages(b, meta, cells)
	var causes []string
	for _, sc := range meta.Scenarios {
		for _, st := range strategyOrder(meta) {
			if c := cells[sc.Name][st]; c != nil && len(c.WriteErrors) > 0 {
				var kv []string
				for k, v := range c.WriteErrors {
					kv = append(kv, fmt.Sprintf("%d × `%s`", v, k))
				}
				sort.Strings(kv)
				causes = append(causes, fmt.Sprintf("%s/%s: %s", sc.Name, st, strings.Join(kv, ", ")))
			}
		}
	}
	if len(causes) > 0 {
		p("\nFailed writes by error (`context deadline exceeded`: the put got no answer within 500 ms, waiting for a leader or a quorum, or stuck on a member that was stopping; `connection reset` / `EOF`: in flight on a member that was SIGKILLed; `raft proposal dropped`: the leader was handing leadership over):\n")
		for _, c := range causes {
			p("- %s\n", c)
		}
	}
	engineCost(b, meta, cells)
}

// outages reports the write outage of the one-member rolls: the background client's worst write gap for
// every strategy, and the engine's own measure (internal/outage) next to it.
func outages(b *strings.Builder, meta *Meta, cells map[string]map[string]*Cell) {
	var parts []string
	for _, sc := range meta.Scenarios {
		for _, st := range strategyOrder(meta) {
			c := cells[sc.Name][st]
			if c == nil || sc.Name != "one-member" || len(c.Gaps) == 0 {
				continue
			}
			part := fmt.Sprintf(" %s/%s: worst write gap %.2f s (max %.2f s)", sc.Name, st, mean(c.Gaps)/1000, maxOf(c.Gaps)/1000)
			if len(c.WriteOutages) > 0 {
				part += fmt.Sprintf(", the engine's own measure %.2f s (max %.2f s)", mean(c.WriteOutages), maxOf(c.WriteOutages))
			}
			parts = append(parts, part+";")
		}
	}
	if len(parts) > 0 {
		fmt.Fprintf(b, "\nWrite outage of a one-member etcd's restart, mean over its rollouts (the background client's worst write gap; the engine's own measure runs from its last linearizable read before the restart to its first after, every 50 ms):%s\n", strings.Join(parts, ""))
	}
}

// engineCost reports what the engine process cost the machine that ran it, per scenario and strategy.
func engineCost(b *strings.Builder, meta *Meta, cells map[string]map[string]*Cell) {
	var rows []string
	for _, sc := range meta.Scenarios {
		for _, st := range strategyOrder(meta) {
			c := cells[sc.Name][st]
			if c == nil || len(c.CPUPerCluster) == 0 {
				continue
			}
			rows = append(rows, fmt.Sprintf("| %s | %s | %.2f | %.3f (max %.3f) | %.0f | %s | %s |", sc.Name, st,
				mean(c.CPUPerCluster), mean(c.CPUPerMember), maxOf(c.CPUPerMember), c.MaxRSSMB, anonFile(c), c.PeakGoMemory.describe()))
		}
	}
	if len(rows) == 0 {
		return
	}
	fmt.Fprintf(b, "\nWhat the engine costs the machine that runs it: the engine process alone (the engines run in a child process; the background clients and the monitor stay in the bench's), getrusage user + system CPU and peak RSS, and the Go runtime's own account at its largest (what of the RSS is heap in use, free heap not yet returned, and goroutine stacks; the rest of the RSS is mostly the binary's resident pages). The default rolls are done by kube-controller-manager, shared with everything else. The profiled rollout (ten-clusters run 0) is left out: profiling costs CPU and memory of its own.\n\n")
	fmt.Fprintf(b, "| scenario | strategy | CPU s per cluster rollout | CPU s per member rolled | peak RSS MB | of it at most, MB: anonymous / file-backed | Go runtime at its peak, MB |\n|---|---|---|---|---|---|---|\n")
	for _, r := range rows {
		fmt.Fprintln(b, r)
	}
}

// anonFile is a cell's sampled peaks of anonymous and file-backed memory, "–" in data from before them.
func anonFile(c *Cell) string {
	if c.AnonRSSMB == 0 {
		return "–"
	}
	return fmt.Sprintf("%.0f / %.0f", c.AnonRSSMB, c.FileRSSMB)
}

// overriddenWindow is the stability window the run set instead of the engine's default, if it did.
func overriddenWindow(meta *Meta) string {
	for _, s := range meta.Strategies {
		if s.StableFor != "" {
			return s.StableFor
		}
	}
	return ""
}

// addTrustCost adds what one rollout's trust checks cost, per member it rolled.
func (c *Cell) addTrustCost(r rollout.Result) {
	n := float64(len(r.MembersRolled))
	if r.TrustChecks.Checks == 0 || n == 0 {
		return
	}
	c.TrustProbes = append(c.TrustProbes, float64(r.TrustChecks.Probes)/n)
	c.TrustMs = append(c.TrustMs, float64(r.TrustChecks.Duration.Milliseconds())/n)
	c.TrustRequests = append(c.TrustRequests, float64(r.TrustChecks.APIRequests)/n)
}

// trustCosts reports, per scenario whose members run TLS, what the engine's trust checks cost per member.
func trustCosts(b *strings.Builder, meta *Meta, cells map[string]map[string]*Cell) {
	line := ""
	for _, sc := range meta.Scenarios {
		for _, st := range strategyOrder(meta) {
			if c := cells[sc.Name][st]; c != nil && len(c.TrustProbes) > 0 {
				line += fmt.Sprintf(" %s/%s %.1f / %.0f ms (max %.0f) / %.1f;", sc.Name, st, mean(c.TrustProbes), mean(c.TrustMs),
					maxOf(c.TrustMs), mean(c.TrustRequests))
			}
		}
	}
	if line != "" {
		b.WriteString("\nThe TLS trust checks before restarts (issue 33: the new peer leaf presented to every other member's peer port, the client ports' certificates read), per member rolled, mean: ports probed / time / API requests (port-forwards opened, Secrets read):" + line + "\n")
	}
}

// addSnapshotStep adds the snapshot step of one rollout, if its engine took one before its first restart.
func (c *Cell) addSnapshotStep(r rollout.Result, events []TimedEvent) {
	roll := r.FinishedAt.Sub(r.StartedAt)
	for _, ev := range events {
		if ev.Kind == rollout.EventSnapshotStored && ev.Elapsed > 0 && roll > 0 && r.Snapshot != nil {
			c.SnapshotSteps = append(c.SnapshotSteps, ev.Elapsed.Seconds())
			c.SnapshotShares = append(c.SnapshotShares, ev.Elapsed.Seconds()/roll.Seconds())
			c.SnapshotMB = append(c.SnapshotMB, float64(r.Snapshot.Size)/1e6)
		}
	}
}

// snapshotSteps reports, per cell whose engines took snapshots before a point of no return, what they added
// to the roll, and the engine's peak memory next to ten-clusters' (the same process shape without them).
func snapshotSteps(b *strings.Builder, meta *Meta, cells map[string]map[string]*Cell) {
	line := ""
	for _, sc := range meta.Scenarios {
		for _, st := range strategyOrder(meta) {
			c := cells[sc.Name][st]
			if c == nil || len(c.SnapshotSteps) == 0 {
				continue
			}
			line += fmt.Sprintf(" %s/%s %d snapshots of %.1f MB: %.2f s each (max %.2f), %.0f %% of the cluster's roll;", sc.Name, st,
				len(c.SnapshotSteps), mean(c.SnapshotMB), mean(c.SnapshotSteps), maxOf(c.SnapshotSteps), 100*mean(c.SnapshotShares))
			if ten := cells["ten-clusters"][st]; sc.Clusters == 10 && sc.Name != "ten-clusters" && ten != nil && c.AnonRSSMB > 0 && ten.AnonRSSMB > 0 {
				line += fmt.Sprintf(" peak RSS %.0f MB anonymous vs %.0f MB for ten-clusters;", c.AnonRSSMB, ten.AnonRSSMB)
			}
		}
	}
	if line != "" {
		b.WriteString("\nSnapshots before a point of no return (issue 34: from the leader through the port-forward, checked, stored, read back), per cluster rollout:" + line + "\n")
	}
}
