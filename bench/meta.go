package main

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"time"

	"github.com/etcd-rollout/pulumi-etcd-rollout/tests/harness"
)

// Meta is what a reader needs to judge the numbers: when, on what, with which versions and settings.
type Meta struct {
	Date        time.Time                    `json:"date"`
	Commit      string                       `json:"commit"`
	Go          string                       `json:"go"`
	Kubernetes  string                       `json:"kubernetes"`
	Etcd        string                       `json:"etcd"`
	CPU         string                       `json:"cpu"`
	Cores       int                          `json:"cores"`
	MemoryGB    float64                      `json:"memoryGB"`
	LoadAvg     string                       `json:"loadAvg"`
	Runs        int                          `json:"runs"`
	Strategies  []StrategyMeta               `json:"strategies"`
	Scenarios   []ScenarioMeta               `json:"scenarios"`
	Facts       map[string]map[string]string `json:"facts"`
	Took        map[string]string            `json:"took"`
	Done        []string                     `json:"done"`
	Failed      []string                     `json:"failed,omitempty"`
	CommandLine string                       `json:"commandLine"`
}

type StrategyMeta struct {
	Name, About string
	// StableFor is set when the run overrode the engine's canary stability window (-stable-for).
	StableFor string `json:",omitempty"`
}

type ScenarioMeta struct {
	Name, Title string
	Runs        int
	Replicas    int
	Clusters    int
}

func collectMeta(ctx context.Context, c *harness.Cluster, runs int, strats []Strategy, sel []Scenario) (*Meta, error) {
	m := &Meta{Date: time.Now().UTC(), Go: runtime.Version(), Cores: runtime.NumCPU(), Runs: runs,
		Facts: map[string]map[string]string{}, Took: map[string]string{}, CommandLine: strings.Join(os.Args, " ")}
	if v, err := c.Kube.Discovery().ServerVersion(); err == nil {
		m.Kubernetes = v.GitVersion
	}
	if out, err := exec.CommandContext(ctx, "git", "rev-parse", "--short", "HEAD").Output(); err == nil {
		m.Commit = strings.TrimSpace(string(out))
	}
	m.Etcd = etcdVersion(ctx)
	m.CPU = cpuModel()
	m.MemoryGB = memTotalGB()
	if b, err := os.ReadFile("/proc/loadavg"); err == nil {
		m.LoadAvg = strings.Join(strings.Fields(string(b))[:3], " ")
	}
	for _, s := range strats {
		sm := StrategyMeta{Name: s.Name, About: s.About}
		if s.StableFor > 0 {
			sm.StableFor = s.StableFor.String()
		}
		m.Strategies = append(m.Strategies, sm)
	}
	for _, s := range sel {
		spec, _ := s.Spec.WithDefaults()
		m.Scenarios = append(m.Scenarios, ScenarioMeta{Name: s.Name, Title: s.title(), Runs: runsFor(s, runs),
			Replicas: spec.Replicas, Clusters: s.Clusters})
	}
	return m, nil
}

// etcdVersion asks the member binary the harness runs (.tools/bin/etcd) for its version.
func etcdVersion(ctx context.Context) string {
	root, err := harness.RepoRoot()
	if err != nil {
		return "unknown"
	}
	bin := filepath.Join(root, ".tools", "bin", "etcd")
	out, err := exec.CommandContext(ctx, bin, "--version").Output()
	if err != nil {
		return "unknown"
	}
	for _, l := range strings.Split(string(out), "\n") {
		if v, ok := strings.CutPrefix(l, "etcd Version: "); ok {
			return v
		}
	}
	return strings.TrimSpace(string(out))
}

func cpuModel() string {
	f, err := os.Open("/proc/cpuinfo")
	if err != nil {
		return "unknown"
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if k, v, ok := strings.Cut(sc.Text(), ":"); ok && strings.TrimSpace(k) == "model name" {
			return strings.TrimSpace(v)
		}
	}
	return "unknown"
}

func memTotalGB() float64 {
	b, err := os.ReadFile("/proc/meminfo")
	if err != nil {
		return 0
	}
	var kb float64
	for _, l := range strings.Split(string(b), "\n") {
		if strings.HasPrefix(l, "MemTotal:") {
			fmt.Sscanf(strings.TrimPrefix(l, "MemTotal:"), "%f", &kb)
		}
	}
	return kb / 1024 / 1024
}
