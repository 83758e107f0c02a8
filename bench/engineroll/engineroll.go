// Package engineroll is the process the benchmark measures: it rolls some StatefulSets at once with the
// engine, as the provider does when a stack holds several Rollouts, and reports what that took. It imports
// the engine and client-go and nothing of the benchmark's own (plots, fonts, the harness), so the CPU time
// and peak RSS of the bench-engine binary built from it are what a process running the engine pays.
package engineroll

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"sync"
	"time"

	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/etcd-rollout/pulumi-etcd-rollout/rollout"
)

// Settings are the engine settings of one benchmark strategy.
type Settings struct {
	Policy    rollout.LeaderPolicy
	Cooldown  time.Duration
	StableFor time.Duration // 0: the engine's default
	// AcceptWriteOutage and SnapshotTo are set for a one-member etcd: the consent its roll needs, and where the
	// snapshot the engine takes before it goes.
	AcceptWriteOutage bool
	SnapshotTo        string
}

// Target is one StatefulSet for the engine to roll.
type Target struct {
	Namespace   string `json:"namespace"`
	StatefulSet string `json:"statefulSet"`
	Service     string `json:"service"`
	// TLSFiles are the client certificate paths inside the member's container; nil for plain HTTP.
	TLSFiles *rollout.TLSFiles `json:"tlsFiles,omitempty"`
}

// EngineOutcome is one engine run: the engine's own account and its transfer steps with their times.
type EngineOutcome struct {
	Target    Target         `json:"target"`
	Result    rollout.Result `json:"result"`
	Err       string         `json:"err,omitempty"`
	Transfers []time.Time    `json:"transfers"`
	// Events is the engine's progress, kept to explain where a slow rollout spent its time.
	Events []TimedEvent `json:"events"`
}

// TimedEvent is one progress line of the engine, with the typed fields the report reads.
type TimedEvent struct {
	Time    time.Time         `json:"time"`
	Kind    rollout.EventKind `json:"kind,omitempty"`
	Pod     string            `json:"pod,omitempty"`
	Elapsed time.Duration     `json:"elapsed,omitempty"`
	Message string            `json:"message"`
}

// EngineRun is what rolling some targets at once in one process did.
type EngineRun struct {
	Outcomes []EngineOutcome `json:"outcomes"`
	Wall     time.Duration   `json:"wall"`
	// MaxRSSKB is the peak resident set of the process that ran the engines (getrusage), in KiB.
	MaxRSSKB int64 `json:"maxRSSKB"`
	// GoMemory is the Go runtime's own account at the moment its memory was largest: what of the peak RSS is
	// heap, goroutine stacks and the runtime's other memory (the rest is the binary's pages and the like).
	GoMemory GoMemory `json:"goMemory"`
	// PeakRSS splits the resident set: what the engines hold, and what is the binary's pages.
	PeakRSS
	// CPU is that process's user + system time, from its start (set by the parent, which reaps it).
	CPU time.Duration `json:"cpu"`
}

// roll runs one engine per target, all at once, through the product's own path (port-forward to
// each member), and waits for all of them.
// The memory is sampled throughout (with the profiles of the heap's peak when profiles is set), and
// returned for the profiles to be written.
func roll(ctx context.Context, rc *rest.Config, targets []Target, st Settings, profiles bool) (EngineRun, memorySamples) {
	run := EngineRun{Outcomes: make([]EngineOutcome, len(targets))}
	stopSampling := sampleMemory(profiles)
	stopRSS := run.PeakRSS.sample()
	start := time.Now()
	var wg sync.WaitGroup
	for i, t := range targets {
		wg.Add(1)
		go func() {
			defer wg.Done()
			out := &run.Outcomes[i]
			out.Target = t
			cfg := rollout.NewConfig(t.StatefulSet, t.Namespace, t.Service)
			cfg.LeaderPolicy, cfg.Cooldown = st.Policy, st.Cooldown
			cfg.ReadyTimeout, cfg.HealthTimeout, cfg.TLS = 2*time.Minute, time.Minute, t.TLSFiles
			cfg.AcceptWriteOutage, cfg.SnapshotTo = st.AcceptWriteOutage, st.SnapshotTo
			var mu sync.Mutex
			eng, err := rollout.New(cfg, rollout.Options{RestConfig: rc, StableFor: st.StableFor, OnEvent: func(ev rollout.Event) {
				mu.Lock()
				defer mu.Unlock()
				out.Events = append(out.Events, TimedEvent{Time: ev.Time, Kind: ev.Kind, Pod: ev.Pod, Elapsed: ev.Elapsed, Message: ev.Message})
				if ev.Step.Kind == rollout.StepTransferLeader {
					out.Transfers = append(out.Transfers, ev.Time)
				}
			}})
			if err != nil {
				out.Err = err.Error()
				return
			}
			defer eng.Close()
			res, err := eng.Run(ctx)
			out.Result = res
			if err != nil {
				out.Err = err.Error()
			}
		}()
	}
	wg.Wait()
	run.Wall = time.Since(start)
	stopRSS()
	run.MaxRSSKB = maxRSSKB()
	samples := stopSampling()
	run.GoMemory = samples.peak
	return run, samples
}

// Command is the bench-engine binary: roll the given targets at once and print the EngineRun as JSON.
func Command(args []string) error {
	fs := flag.NewFlagSet("bench-engine", flag.ContinueOnError)
	kubeconfig := fs.String("kubeconfig", "", "kubeconfig of the cluster")
	policy := fs.String("policy", string(rollout.LeaderLazy), "leader policy")
	cooldown := fs.Duration("cooldown", 0, "cool-down between members")
	stableFor := fs.Duration("stable-for", 0, "the canary's stability window (0: the engine's default)")
	targets := fs.String("targets", "", "JSON list of targets")
	acceptOutage := fs.Bool("accept-write-outage", false, "roll one-member etcds (Config.AcceptWriteOutage)")
	snapshotTo := fs.String("snapshot-to", "", "where snapshots before a point of no return go (Config.SnapshotTo)")
	snapshotOnly := fs.Bool("snapshot-only", false, "take one snapshot of the first target to -snapshot-to instead of rolling, and print a SnapshotRun")
	profile := fs.String("profile", "", "write <prefix>.cpu.pprof, <prefix>.heap.pprof and <prefix>.goroutine.pprof")
	if err := fs.Parse(args); err != nil {
		return err
	}
	var ts []Target
	if err := json.Unmarshal([]byte(*targets), &ts); err != nil {
		return fmt.Errorf("-targets: %w", err)
	}
	rc, err := clientcmd.BuildConfigFromFlags("", *kubeconfig)
	if err != nil {
		return fmt.Errorf("loading %s: %w", *kubeconfig, err)
	}
	rc.QPS, rc.Burst = 50, 100
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Minute)
	defer cancel()
	if *snapshotOnly {
		if len(ts) == 0 {
			return fmt.Errorf("-snapshot-only: no target")
		}
		return json.NewEncoder(os.Stdout).Encode(snapshotOnce(ctx, rc, ts[0], *snapshotTo))
	}
	stop, err := startProfiles(*profile)
	if err != nil {
		return err
	}
	run, samples := roll(ctx, rc, ts, Settings{Policy: rollout.LeaderPolicy(*policy), Cooldown: *cooldown, StableFor: *stableFor,
		AcceptWriteOutage: *acceptOutage, SnapshotTo: *snapshotTo}, *profile != "")
	if err := stop(samples); err != nil {
		return err
	}
	return json.NewEncoder(os.Stdout).Encode(run)
}
