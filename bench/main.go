// Command bench measures what users' writes suffer while an etcd StatefulSet rolls, side by side in one run:
// the StatefulSet's default roll, the engine configured as the old rollout Job, and the engine (with its
// cool-down and without), over the scenarios of scenarios.go, on the local cluster of `make cluster-up`.
// It writes bench/results.md and one PNG per scenario; raw data goes to bench/out/ (ignored by git).
//
//	go run . -runs 10 -scenarios all        # what `make bench` runs (bench/run.sh)
//	go run . -report-only                    # redo results.md and the PNGs from bench/out/rollouts.jsonl
//	go run . roll -kubeconfig K -targets J   # internal: roll targets at once (the 10-cluster case's process)
package main

import (
	"bufio"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"log"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"
	"time"

	"github.com/go-logr/logr"
	"k8s.io/klog/v2"

	"github.com/etcd-rollout/pulumi-etcd-rollout/tests/harness"
)

func main() {
	// client-go's port-forward reports every stream a stopping member cuts; that is the roll, not news.
	klog.SetLogger(logr.Discard())
	runs := flag.Int("runs", 5, "rollouts per strategy per scenario (heavy and ten-clusters scale it down, see scenarios.go)")
	names := flag.String("scenarios", "all", "comma-separated scenarios, or all")
	strategyNames := flag.String("strategies", "all", "comma-separated strategies, or all (a selection is for measuring one strategy's cost: it compares nothing)")
	cooldown := flag.Duration("cooldown", time.Second, "cool-down of the job-like and engine strategies (the engine's default is 30s)")
	stableFor := flag.Duration("stable-for", 0, "override the engine strategies' canary stability window (default: the engine's own, 3s); only to measure what the window costs: such results are marked and their targets do not count")
	outDir := flag.String("out", "out", "raw data directory")
	results := flag.String("results", "results.md", "markdown results file (PNGs go next to it)")
	runDir := flag.String("run-dir", "", "the local cluster's run dir (default tests/.run of the repository)")
	reportOnly := flag.Bool("report-only", false, "only regenerate the results from the raw data in -out")
	deadlineFlag := flag.String("deadline", "", "start no round of rollouts after this instant (RFC 3339) or this long after the start (Go duration); results say what was cut")
	flag.Parse()
	log.SetFlags(log.Ltime | log.Lmicroseconds)

	if *reportOnly {
		if err := writeReport(*outDir, *results); err != nil {
			log.Fatal(err)
		}
		return
	}
	sel, err := selectScenarios(*names)
	if err != nil {
		log.Fatal(err)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	deadline, err := parseDeadline(*deadlineFlag, time.Now())
	if err != nil {
		log.Fatal(err)
	}
	strats, err := selectStrategies(strategies(*cooldown, *stableFor), *strategyNames)
	if err != nil {
		log.Fatal(err)
	}
	if err := run(ctx, sel, *runs, strats, *outDir, *results, *runDir, deadline); err != nil {
		log.Fatal(err)
	}
}

// parseDeadline reads -deadline: empty (none), an RFC 3339 instant, or a duration from now.
func parseDeadline(s string, now time.Time) (time.Time, error) {
	if s == "" {
		return time.Time{}, nil
	}
	if t, err := time.Parse(time.RFC3339, s); err == nil {
		return t, nil
	}
	d, err := time.ParseDuration(s)
	if err != nil {
		return time.Time{}, fmt.Errorf("-deadline %q: want an RFC 3339 instant or a duration", s)
	}
	return now.Add(d), nil
}

func run(ctx context.Context, sel []Scenario, runs int, strats []Strategy, outDir, results, runDir string, deadline time.Time) error {
	if runDir == "" {
		var err error
		if runDir, err = harness.RunDir(); err != nil {
			return err
		}
	}
	c, err := harness.Open(runDir)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(outDir, 0o755); err != nil {
		return err
	}
	meta, err := collectMeta(ctx, c, runs, strats, sel)
	if err != nil {
		return err
	}
	if err := writeJSON(filepath.Join(outDir, "meta.json"), meta); err != nil {
		return err
	}
	raw, err := os.Create(filepath.Join(outDir, "rollouts.jsonl"))
	if err != nil {
		return err
	}
	defer raw.Close()
	w := bufio.NewWriter(raw)
	kubeconfig := filepath.Join(runDir, "kubeconfig")

	for _, sc := range sel {
		if !deadline.IsZero() && time.Now().After(deadline) {
			meta.Failed = append(meta.Failed, fmt.Sprintf("%s: not run, the deadline (%s) had passed", sc.Name, deadline.UTC().Format(time.TimeOnly)))
			continue
		}
		n := runsFor(sc, runs)
		log.Printf("scenario %s: %d rollouts per strategy", sc.Name, n)
		t0 := time.Now()
		b, err := setUp(ctx, c, sc)
		if err != nil {
			b.tearDown()
			log.Printf("scenario %s: setting up: %v", sc.Name, err)
			meta.Failed = append(meta.Failed, fmt.Sprintf("%s: setting up: %v", sc.Name, err))
			_ = writeJSON(filepath.Join(outDir, "meta.json"), meta)
			continue
		}
		log.Printf("scenario %s: set up in %s %v", sc.Name, time.Since(t0).Round(time.Second), b.Facts)
		plotRun := plotRunFor(sc, n)
		strats := strategiesOf(sc, strats)
		if len(strats) == 0 {
			meta.Failed = append(meta.Failed, fmt.Sprintf("%s: none of the selected strategies is rolled here (%s)", sc.Name, sc.NotRun))
			b.tearDown()
			continue
		}
		for r := range n {
			// Only whole rounds, so every strategy of a cell has the same runs and leader placements.
			if !deadline.IsZero() && time.Now().After(deadline) {
				meta.Failed = append(meta.Failed, fmt.Sprintf("%s: cut to %d of %d rollouts per strategy by the deadline (%s)",
					sc.Name, r, n, deadline.UTC().Format(time.TimeOnly)))
				break
			}
			for k := range strats {
				if ctx.Err() != nil {
					b.tearDown()
					return ctx.Err()
				}
				st := strats[(k+r)%len(strats)]
				ro := b.rollOnce(ctx, st, r, rollOpts{kubeconfig: kubeconfig, keepOps: r == plotRun,
					profilePrefix: profilePrefix(outDir, sc, st, r)})
				log.Printf("%s/%s run %d: %s", sc.Name, st.Name, r, oneLine(ro))
				if err := json.NewEncoder(w).Encode(ro); err != nil {
					return err
				}
				if err := w.Flush(); err != nil {
					return err
				}
			}
		}
		b.tearDown()
		meta.Facts[sc.Name] = b.Facts
		meta.Took[sc.Name] = time.Since(t0).Round(time.Second).String()
		meta.Done = append(meta.Done, sc.Name)
		if err := writeJSON(filepath.Join(outDir, "meta.json"), meta); err != nil {
			return err
		}
		// Results after every scenario, so a run that dies later still leaves a (labelled) partial table.
		if err := writeReport(outDir, results); err != nil {
			return err
		}
	}
	return nil
}

// plotRunFor is the run whose ops are kept for the scenario's plot: the first with the leader on the last
// ordinal (the first member every strategy restarts): the default roll's worst case, and the one where
// the engine needs two transfers.
func plotRunFor(sc Scenario, runs int) int {
	spec, _ := sc.Spec.WithDefaults()
	return min(spec.Replicas-1, runs-1)
}

func oneLine(r Rollout) string {
	planned, handover, election := 0, 0, 0
	lost := time.Duration(0)
	for _, c := range r.Clusters {
		planned += c.Raft.Count(ChangePlanned)
		handover += c.Raft.Count(ChangeHandover)
		election += c.Raft.Count(ChangeElection)
		lost += c.Avail.QuorumLostFor()
	}
	s := fmt.Sprintf("wall %.1fs, leader changes %d planned / %d hand-over / %d election, quorum lost %s, writes failed %d of %d, worst gap %s, p99 %s",
		r.Wall.Seconds(), planned, handover, election, lost, r.Client.FailedWrites, r.Client.Writes,
		r.Client.WorstGap.Round(time.Millisecond), r.Client.P99Write.Round(time.Millisecond))
	if len(r.Client.WriteErrors) > 0 {
		s += fmt.Sprintf(" %v", r.Client.WriteErrors)
	}
	if rc := r.RetryClient; rc != nil {
		s += fmt.Sprintf("; retrying client: writes failed %d of %d, retries %d, worst time to success %s",
			rc.FailedWrites, rc.Writes, rc.Retries, rc.WorstToSuccess.Round(time.Millisecond))
	}
	s += fmt.Sprintf(" (prep %.1fs, cycle %.1fs)", r.Prep.Seconds(), r.Cycle.Seconds())
	if r.Err != "" {
		s += " ERROR: " + r.Err
	}
	return s
}

func writeJSON(path string, v any) error {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(path, b, 0o644)
}
