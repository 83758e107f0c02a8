package main

import (
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/etcd-rollout/pulumi-etcd-rollout/rollout"
	"github.com/etcd-rollout/pulumi-etcd-rollout/tests/harness"
	"github.com/etcd-rollout/pulumi-etcd-rollout/tests/harness/memberapi"
)

// Strategy is one way to roll the StatefulSet.
type Strategy struct {
	Name string
	// Default is the StatefulSet controller's own roll: partition 0, OrderedReady, nothing else.
	Default bool
	// Hardened is the default roll as a careful user configures it (with Default): the new template carries
	// a readinessProbe on etcd's /readyz (period 1 s, failureThreshold 1) and the StatefulSet waits
	// minReadySeconds (hardenedMinReady) on every member.
	Hardened bool
	Policy   rollout.LeaderPolicy
	Cooldown time.Duration
	// StableFor overrides the engine's canary stability window (rollout.Options.StableFor) when set: not
	// the engine's default, only to measure what the window costs (-stable-for).
	StableFor time.Duration
	About     string
}

// strategies are the columns of the benchmark. The engine's 30 s default cool-down is idle waiting that adds
// exactly (N-1) × cool-down to a roll; it is scaled down (the same value for job-like and engine, so they
// differ only in leader placement) to keep a run of the whole matrix within half an hour.
func strategies(cooldown, stableFor time.Duration) []Strategy {
	all := []Strategy{
		{Name: "default", Default: true, About: "StatefulSet RollingUpdate, partition 0, OrderedReady: what users get without us"},
		{Name: "default-hardened", Default: true, Hardened: true,
			About: fmt.Sprintf("the default roll as a careful user configures it: partition 0, OrderedReady, readinessProbe on /readyz (period 1 s, failureThreshold 1), minReadySeconds %d", hardenedMinReady)},
		{Name: "job-like", Policy: rollout.LeaderJobLike, Cooldown: cooldown,
			About: fmt.Sprintf("the engine as the old Job behaved: leader to member 0 first, to member N-1 before member 0; cool-down %s (the Job's 30 s, scaled down)", cooldown)},
		{Name: "engine", Policy: rollout.LeaderLazy, Cooldown: cooldown,
			About: fmt.Sprintf("the engine's defaults (lazy leader placement, every health gate), cool-down %s (default 30 s, scaled down)", cooldown)},
		{Name: "engine-cd0", Policy: rollout.LeaderLazy, Cooldown: 0, About: "the engine's defaults with cool-down 0"},
	}
	if stableFor > 0 {
		for i := range all {
			if all[i].Default {
				continue
			}
			all[i].StableFor = stableFor
			all[i].About += fmt.Sprintf("; NOT A DEFAULT: the canary's stability window set to %s (-stable-for)", stableFor)
		}
	}
	return all
}

// Scenario is one cluster shape and workload, rolled by every strategy in turn.
type Scenario struct {
	Name  string
	Title string
	Spec  harness.EtcdSpec
	// Clusters rolled at once (one process rolls all of them).
	Clusters int
	// Preload: keys of ValueSize bytes written once before the first roll.
	PreloadKeys, ValueSize int
	// Pressure is a steady write rate (puts/s, ValueSize bytes each, to random preloaded keys) kept up for
	// the whole scenario, so a restarted member has to catch up.
	Pressure int
	// Hang makes every member ignore SIGTERM, so each is SIGKILLed at the end of the grace period.
	Hang bool
	// LoadInterval is the background client's pause between two ops.
	LoadInterval time.Duration
	// RunsFactor scales the runs per cell (heavy and 10-cluster runs are long).
	RunsFactor float64
	// Only names the strategies rolled here (nil: every one); NotRun says, for the report, why the others
	// are not.
	Only   []string
	NotRun string
	// MinorChange makes each run change etcd's minor version as well: 3.5 → 3.6 on even runs, back to 3.5
	// (a downgrade, through etcd's downgrade API) on odd ones; Spec.Version is where the clusters start.
	// The engine takes a verified snapshot of each cluster before its first restart (issue 34).
	MinorChange bool
}

// scenarios are the rows of the benchmark, most telling first: a run cut short by its deadline keeps those.
func scenarios() []Scenario {
	base := harness.EtcdSpec{Name: "etcd", ServiceName: "etcd-headless", GracePeriod: 30 * time.Second}
	with := func(f func(*harness.EtcdSpec)) harness.EtcdSpec { s := base; f(&s); return s }
	return []Scenario{
		{Name: "easy", Title: "easy: 3 members, tiny keyspace, light load, graceful shutdown",
			Spec: base, Clusters: 1, LoadInterval: 10 * time.Millisecond, RunsFactor: 1},
		{Name: "hung", Title: "hung shutdown: every stopped member ignores SIGTERM, SIGKILL after a 1 s grace period",
			Spec: with(func(s *harness.EtcdSpec) { s.GracePeriod = time.Second }), Clusters: 1, Hang: true,
			LoadInterval: 10 * time.Millisecond, RunsFactor: 1},
		{Name: "heavy-immediate", Title: "heavy, no readiness probe: 3 members, large keyspace, steady write load",
			Spec: base, Clusters: 1, PreloadKeys: 400_000, ValueSize: 512, Pressure: 300,
			LoadInterval: 10 * time.Millisecond, RunsFactor: 0.4},
		{Name: "heavy-probe", Title: "heavy, readiness probe on /readyz: 3 members, large keyspace, steady write load",
			Spec: with(func(s *harness.EtcdSpec) { s.Readiness = memberapi.ReadyOnProbe }), Clusters: 1,
			PreloadKeys: 400_000, ValueSize: 512, Pressure: 300, LoadInterval: 10 * time.Millisecond, RunsFactor: 0.4},
		{Name: "ten-clusters", Title: "10 clusters × 3 members rolled at once by one process",
			Spec: base, Clusters: 10, LoadInterval: 20 * time.Millisecond, RunsFactor: 0.6},
		{Name: "mtls", Title: "mTLS (client and peer), the keyspace-etcd-group shape",
			Spec: harness.EtcdSpec{Name: "keyspace-etcd-group-0", ServiceName: "keyspace-etcd-group-0-peer", TLS: true,
				GracePeriod: 30 * time.Second}, Clusters: 1, LoadInterval: 10 * time.Millisecond, RunsFactor: 1},
		// Issue 33: the same shape with the peer CA apart from the client CA (etcd-druid's layout, the one of the
		// Gardener incident). The trust checks' cost per member is reported for both rows (the TLS trust checks
		// line); this one adds the probes of a second CA's peer port to mtls's.
		{Name: "mtls-peerca", Title: "mTLS with the peer CA apart from the client CA (etcd-druid's layout): the trust checks before restarts, next to mtls",
			Spec: harness.EtcdSpec{Name: "keyspace-etcd-group-0", ServiceName: "keyspace-etcd-group-0-peer", TLS: true, SeparatePeerCA: true,
				GracePeriod: 30 * time.Second}, Clusters: 1, LoadInterval: 10 * time.Millisecond, RunsFactor: 1,
			Only:   []string{"default", "engine", "engine-cd0"},
			NotRun: "default-hardened and job-like roll this shape as they roll mtls (the peer CA changes nothing for them), so they are not run"},
		{Name: "five", Title: "5 members",
			Spec: with(func(s *harness.EtcdSpec) { s.Replicas = 5 }), Clusters: 1, LoadInterval: 10 * time.Millisecond, RunsFactor: 1},
		// Issue 32: what a replacement costs next to a restart is this row against easy's (the same shape
		// with its data on a volumeClaimTemplate, restarted).
		{Name: "emptydir", Title: "data on an emptyDir: 3 members, each replaced (removed, back as a learner under a new ID, promoted) instead of restarted; compare with easy, the same shape restarted",
			Spec: with(func(s *harness.EtcdSpec) { s.DataDiesWithPod = true }), Clusters: 1, LoadInterval: 10 * time.Millisecond, RunsFactor: 1,
			Only:   []string{"engine", "engine-cd0"},
			NotRun: "default, default-hardened and job-like restart a member under the ID whose data died with its pod (the unsafe rejoin of tests/faults TestARestartOfAMemberWhoseDataDiedAdoptsItsOldID: a crash loop, then an empty voter), so they are not run"},
		// Issue 34: a one-member etcd's restart stops writes whoever rolls it; the default roll's is the floor,
		// and the engine (with acceptWriteOutage, a verified snapshot first) should cost no more.
		{Name: "one-member", Title: "one member (spec.replicas 1): its restart stops every write whoever rolls it; the engine with acceptWriteOutage stores a verified snapshot first and measures the outage",
			Spec: with(func(s *harness.EtcdSpec) { s.Replicas = 1 }), Clusters: 1, LoadInterval: 10 * time.Millisecond, RunsFactor: 1,
			Only:   []string{"default", "engine"},
			NotRun: "default-hardened (its /readyz probe is the default roll's with a wait), job-like and engine-cd0 (the engine with another leader policy or no cool-down: one member has neither a leader to move nor a next member) add nothing to the floor and the engine's cost, so they are not run"},
		// Issue 34: what the snapshots before a point of no return add, ten clusters at once: their time within
		// the roll (the snapshot step, from the engine's own event) and the engine's peak memory, next to
		// ten-clusters (the same process without snapshots or version change).
		{Name: "ten-minor", Title: "10 clusters × 3 members, each run a minor change (3.5 → 3.6, then back) by one process, a verified snapshot of each cluster before its first restart",
			Spec: with(func(s *harness.EtcdSpec) { s.Version = "3.5" }), Clusters: 10, LoadInterval: 20 * time.Millisecond, RunsFactor: 0.4,
			MinorChange: true, Only: []string{"engine"},
			NotRun: "the default rolls restart 3.6 members back onto 3.5 without etcd's downgrade API, which etcd refuses; job-like and engine-cd0 take the same snapshot as engine, so they are not run"},
	}
}

// strategiesOf keeps the strategies scenario sc rolls (Scenario.Only), in their order.
func strategiesOf(sc Scenario, all []Strategy) []Strategy {
	if len(sc.Only) == 0 {
		return all
	}
	return slices.DeleteFunc(slices.Clone(all), func(st Strategy) bool { return !slices.Contains(sc.Only, st.Name) })
}

// selectScenarios picks scenarios by comma-separated names ("" or "all": every one).
func selectScenarios(names string) ([]Scenario, error) {
	all := scenarios()
	if names == "" || names == "all" {
		return all, nil
	}
	var out []Scenario
	for _, n := range strings.Split(names, ",") {
		n = strings.TrimSpace(n)
		found := false
		for _, s := range all {
			if s.Name == n {
				out, found = append(out, s), true
			}
		}
		if !found {
			var known []string
			for _, s := range all {
				known = append(known, s.Name)
			}
			return nil, fmt.Errorf("unknown scenario %q (known: %s)", n, strings.Join(known, ", "))
		}
	}
	return out, nil
}

// selectStrategies keeps the strategies named in names (comma-separated), or all of them for "" or "all": a
// run measuring one strategy's cost need not roll the others. Such results compare nothing, so run.sh refuses
// a selection with the committed results.md.
func selectStrategies(all []Strategy, names string) ([]Strategy, error) {
	if names == "" || names == "all" {
		return all, nil
	}
	var out []Strategy
	for _, n := range strings.Split(names, ",") {
		n = strings.TrimSpace(n)
		i := slices.IndexFunc(all, func(s Strategy) bool { return s.Name == n })
		if i < 0 {
			known := make([]string, len(all))
			for j, s := range all {
				known[j] = s.Name
			}
			return nil, fmt.Errorf("unknown strategy %q (known: %s)", n, strings.Join(known, ", "))
		}
		out = append(out, all[i])
	}
	return out, nil
}

// runsFor is the number of rollouts per strategy of a scenario: runs scaled by its factor, at least 1.
func runsFor(s Scenario, runs int) int {
	return max(1, int(float64(runs)*s.RunsFactor+0.5))
}

// title is the scenario as the report names it: its Title, and why some strategies are not run.
func (s Scenario) title() string {
	if s.NotRun == "" {
		return s.Title
	}
	return s.Title + " (" + s.NotRun + ")"
}
