package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sync/errgroup"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/etcd-rollout/pulumi-etcd-rollout/rollout"
	"github.com/etcd-rollout/pulumi-etcd-rollout/tests/harness"
	"github.com/etcd-rollout/pulumi-etcd-rollout/tests/harness/memberapi"
)

// Target is one StatefulSet for the engine to roll.
type Target struct {
	Namespace   string `json:"namespace"`
	StatefulSet string `json:"statefulSet"`
	Service     string `json:"service"`
	TLS         bool   `json:"tls"`
}

func targetOf(e *harness.Etcd) Target {
	return Target{Namespace: e.Namespace, StatefulSet: e.Spec.Name, Service: e.Spec.ServiceName, TLS: e.TLS != nil}
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

// TimedEvent is one progress line of the engine.
type TimedEvent struct {
	Time    time.Time `json:"time"`
	Message string    `json:"message"`
}

// EngineRun is what rolling some targets at once in one process did.
type EngineRun struct {
	Outcomes []EngineOutcome `json:"outcomes"`
	Wall     time.Duration   `json:"wall"`
	// MaxRSSKB is the peak resident set of the process that ran the engines (getrusage), in KiB.
	MaxRSSKB int64 `json:"maxRSSKB"`
	// CPU is that process's user + system time, from its start (set by the parent, which reaps it).
	CPU time.Duration `json:"cpu"`
}

// tlsFiles are the client certificate paths inside the etcd container of the mTLS manifests.
var tlsFiles = &rollout.TLSFiles{
	CAFile:   memberapi.DefaultTLSDir + "/" + memberapi.SecretCA,
	CertFile: memberapi.DefaultTLSDir + "/" + memberapi.SecretClientCert,
	KeyFile:  memberapi.DefaultTLSDir + "/" + memberapi.SecretClientKey,
}

// rollWithEngines runs one engine per target, all at once, through the product's own path (port-forward to
// each member), and waits for all of them.
func rollWithEngines(ctx context.Context, rc *rest.Config, targets []Target, st Strategy) EngineRun {
	run := EngineRun{Outcomes: make([]EngineOutcome, len(targets))}
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
			cfg.ReadyTimeout, cfg.HealthTimeout = 2*time.Minute, time.Minute
			if t.TLS {
				cfg.TLS = tlsFiles
			}
			var mu sync.Mutex
			eng, err := rollout.New(cfg, rollout.Options{RestConfig: rc, StableFor: st.StableFor, OnEvent: func(ev rollout.Event) {
				mu.Lock()
				defer mu.Unlock()
				out.Events = append(out.Events, TimedEvent{Time: ev.Time, Message: ev.Message})
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
	run.MaxRSSKB = maxRSSKB()
	return run
}

func maxRSSKB() int64 {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return ru.Maxrss
}

// rollWithEnginesInChild runs rollWithEngines in a fresh process (this binary's "roll" command), so the peak
// RSS is that of a process that did nothing but the rollouts.
func rollWithEnginesInChild(ctx context.Context, kubeconfig string, targets []Target, st Strategy, profilePrefix string) (EngineRun, error) {
	self, err := os.Executable()
	if err != nil {
		return EngineRun{}, fmt.Errorf("finding the bench binary: %w", err)
	}
	spec, err := json.Marshal(targets)
	if err != nil {
		return EngineRun{}, err
	}
	cmd := exec.CommandContext(ctx, self, "roll", "-kubeconfig", kubeconfig, "-policy", string(st.Policy),
		"-cooldown", st.Cooldown.String(), "-stable-for", st.StableFor.String(), "-targets", string(spec),
		"-profile", profilePrefix)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return EngineRun{}, fmt.Errorf("bench roll (child): %w: %s", err, strings.TrimSpace(stderr.String()))
	}
	var run EngineRun
	if err := json.Unmarshal(stdout.Bytes(), &run); err != nil {
		return EngineRun{}, fmt.Errorf("decoding the child's answer: %w", err)
	}
	run.CPU = cmd.ProcessState.UserTime() + cmd.ProcessState.SystemTime()
	return run, nil
}

// rollCommand is `bench roll`: roll the given targets at once and print the EngineRun as JSON.
func rollCommand(args []string) error {
	fs := flag.NewFlagSet("roll", flag.ContinueOnError)
	kubeconfig := fs.String("kubeconfig", "", "kubeconfig of the cluster")
	policy := fs.String("policy", string(rollout.LeaderLazy), "leader policy")
	cooldown := fs.Duration("cooldown", 0, "cool-down between members")
	stableFor := fs.Duration("stable-for", 0, "the canary's stability window (0: the engine's default)")
	targets := fs.String("targets", "", "JSON list of targets")
	profile := fs.String("profile", "", "write <prefix>.cpu.pprof and <prefix>.heap.pprof")
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
	stop, err := startProfiles(*profile)
	if err != nil {
		return err
	}
	run := rollWithEngines(ctx, rc, ts, Strategy{Policy: rollout.LeaderPolicy(*policy), Cooldown: *cooldown, StableFor: *stableFor})
	if err := stop(); err != nil {
		return err
	}
	return json.NewEncoder(os.Stdout).Encode(run)
}

// rollDefault is the default StatefulSet roll of every cluster at once: partition 0, then wait until the
// StatefulSet controller has replaced every pod and etcd is healthy (harness.WaitRolledOut), then the
// partition goes back to replicas so the engine strategies find the lock they expect.
func rollDefault(ctx context.Context, clusters []*harness.Etcd) (time.Duration, error) {
	start := time.Now()
	for _, e := range clusters {
		if err := e.SetPartition(ctx, 0); err != nil {
			return 0, err
		}
	}
	g, gctx := errgroup.WithContext(ctx)
	for _, e := range clusters {
		g.Go(func() error { return e.WaitRolledOut(gctx, 3*time.Minute) })
	}
	err := g.Wait()
	wall := time.Since(start)
	for _, e := range clusters {
		if lerr := e.SetPartition(context.WithoutCancel(ctx), e.Spec.Replicas); lerr != nil {
			err = errors.Join(err, lerr)
		}
	}
	return wall, err
}
