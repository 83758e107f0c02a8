package main

import (
	"context"
	"errors"
	"fmt"
	"log"
	"strings"
	"sync"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"golang.org/x/sync/errgroup"

	"github.com/etcd-rollout/pulumi-etcd-rollout/bench/engineroll"
	"github.com/etcd-rollout/pulumi-etcd-rollout/tests/harness"
)

// Rollout is one measured rollout of one strategy in one scenario (of every cluster of the scenario at once).
type Rollout struct {
	Scenario string `json:"scenario"`
	Strategy string `json:"strategy"`
	Run      int    `json:"run"`
	// LeaderStart is the ordinal the leader was placed on before the roll, per cluster.
	LeaderStart []int         `json:"leaderStart"`
	Start       time.Time     `json:"start"` // the roll began
	End         time.Time     `json:"end"`   // the roll was done (every member updated, healthy)
	Wall        time.Duration `json:"wall"`
	Err         string        `json:"err,omitempty"`
	MaxRSSKB    int64         `json:"maxRSSKB,omitempty"`
	// PeakRSS splits the engine process's resident set: anonymous (what the engines hold) and file-backed
	// (the binary's pages); zero for the default rolls and in data from before it.
	PeakRSS engineroll.PeakRSS `json:"peakRSS,omitzero"`
	// Profiled says the engine process wrote CPU and heap profiles: that costs CPU and memory of its own, so
	// the cost table leaves such a rollout out.
	Profiled bool `json:"profiled,omitempty"`
	// GoMemory is the engine process's Go runtime memory at its largest (engine strategies).
	GoMemory *engineroll.GoMemory `json:"goMemory,omitempty"`
	// EngineCPU is the user + system CPU time of the process that ran the engines (getrusage of the child);
	// zero for the default rolls and in data from before it.
	EngineCPU time.Duration `json:"engineCPU,omitempty"`
	Clusters  []ClusterRoll `json:"clusters"`
	// Client sums the background clients of all clusters.
	Client ClientStats `json:"client"`
	// RetryClient sums the retrying (production-like) clients of all clusters; nil in data from before it.
	RetryClient *RetryClientStats `json:"retryClient,omitempty"`
	// LoadFrom/LoadTo bound the background client's ops (loadMargin before Start to loadMargin after End).
	LoadFrom time.Time `json:"loadFrom"`
	LoadTo   time.Time `json:"loadTo"`
	// Prep and Cycle are the benchmark's own overhead: placing the leader etc. before LoadFrom, and the whole
	// rollout including the accounting after it (sizes the run count of a full run).
	Prep  time.Duration `json:"prep"`
	Cycle time.Duration `json:"cycle"`
}

// ClusterRoll is what one cluster went through in a rollout.
type ClusterRoll struct {
	Namespace string `json:"namespace"`
	// Planned is the number of MoveLeader transfers the roller made (0 for the default roll).
	Planned    int          `json:"planned"`
	TermBefore uint64       `json:"termBefore"`
	TermAfter  uint64       `json:"termAfter"`
	Raft       RaftHistory  `json:"raft"`
	Avail      Availability `json:"avail"`
	Startups   []Startup    `json:"startups"`
	// MetricCheck is true when every member's etcd_server_leader_changes_seen_total equals the leader
	// changes its current process logged: the logs are read right.
	MetricCheck  bool              `json:"metricCheck"`
	MetricDetail string            `json:"metricDetail,omitempty"`
	Client       ClientStats       `json:"client"`
	Ops          []harness.Op      `json:"ops,omitempty"`
	Engine       *EngineOutcome    `json:"engine,omitempty"`
	Transfers    []time.Time       `json:"transfers,omitempty"`
	Extra        map[string]string `json:"extra,omitempty"`
	// RetryClient is what the retrying client saw; RetryWrites its writes, kept like Ops.
	RetryClient *RetryClientStats `json:"retryClient,omitempty"`
	RetryWrites []RetryWrite      `json:"retryWrites,omitempty"`
}

// TermCheck is true when the raft term rose by exactly the number of terms the logs show campaigns in.
func (c ClusterRoll) TermCheck() bool { return c.TermAfter-c.TermBefore == uint64(len(c.Raft.Terms)) }

// loadMargin is how long the background client and the monitor run before and after the roll itself, so the
// numbers include the steady state on both sides (and whatever the roll's last step leaves behind).
const loadMargin = 500 * time.Millisecond

// rolloutTimeout bounds one measured rollout with its preparation and accounting.
const rolloutTimeout = 4 * time.Minute

// bed is the set-up of one scenario: its clusters, their clients and member IDs, its pressure load.
type bed struct {
	sc         Scenario
	c          *harness.Cluster
	clusters   []*harness.Etcd
	clients    []*clientv3.Client
	ids        []map[string]int // hex raft member ID -> ordinal, per cluster
	logs       [][]string
	pressure   []*Pressure
	namespaces []string
	// memberClients are the retrying client's connections, one per member, per cluster.
	memberClients []memberClients
	// Setup facts for the report (db size, preload time, ...).
	Facts map[string]string
}

// setUp creates the scenario's clusters and preloads them.
func setUp(ctx context.Context, c *harness.Cluster, sc Scenario) (*bed, error) {
	b := &bed{sc: sc, c: c, Facts: map[string]string{}}
	b.clusters = make([]*harness.Etcd, sc.Clusters)
	b.namespaces = make([]string, sc.Clusters)
	start := time.Now()
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(3)
	for i := range sc.Clusters {
		g.Go(func() error {
			ns, err := c.CreateNamespace(gctx, "bench-"+sc.Name)
			if err != nil {
				return err
			}
			b.namespaces[i] = ns
			e, err := c.CreateEtcd(gctx, ns, sc.Spec)
			if err != nil {
				return fmt.Errorf("scenario %s: %w", sc.Name, err)
			}
			b.clusters[i] = e
			return nil
		})
	}
	if err := g.Wait(); err != nil {
		return b, err
	}
	b.Facts["create"] = time.Since(start).Round(100 * time.Millisecond).String()
	for _, e := range b.clusters {
		cli, err := e.Client(ctx)
		if err != nil {
			return b, err
		}
		b.clients = append(b.clients, cli)
		mc, err := dialMembers(ctx, e)
		if err != nil {
			return b, err
		}
		b.memberClients = append(b.memberClients, mc)
		ids := map[string]int{}
		var logs []string
		for o := range e.Spec.Replicas {
			st, err := e.Status(ctx, o)
			if err != nil {
				return b, err
			}
			ids[fmt.Sprintf("%x", st.MemberID)] = o
			lf, err := e.LogFile(ctx, o)
			if err != nil {
				return b, err
			}
			logs = append(logs, lf)
		}
		b.ids = append(b.ids, ids)
		b.logs = append(b.logs, logs)
	}
	if sc.PreloadKeys > 0 {
		for i, e := range b.clusters {
			t0 := time.Now()
			rev, err := harness.Preload(ctx, b.clients[i], "bench/preload/", sc.PreloadKeys, sc.ValueSize)
			if err != nil {
				return b, err
			}
			b.Facts["preload"] = fmt.Sprintf("%d keys × %d B in %s (revision %d)", sc.PreloadKeys, sc.ValueSize,
				time.Since(t0).Round(100*time.Millisecond), rev)
			if size, err := dbSize(ctx, e, 0); err == nil {
				b.Facts["db size"] = fmt.Sprintf("%.0f MB", size/1e6)
			}
		}
		if err := b.measureSnapshots(ctx, c.Kubeconfig); err != nil {
			return b, fmt.Errorf("scenario %s: %w", sc.Name, err)
		}
	}
	if sc.Pressure > 0 {
		for i := range b.clusters {
			b.pressure = append(b.pressure, StartPressure(b.clients[i], "bench/preload/", sc.PreloadKeys, sc.ValueSize, sc.Pressure))
		}
	}
	return b, nil
}

// retryProbeKey is the retrying client's key, apart from today's client's bench/probe.
const retryProbeKey = "bench/probe-retry"

// dialMembers opens one client per member of e, on the same local client URLs as today's client.
func dialMembers(ctx context.Context, e *harness.Etcd) (memberClients, error) {
	var mc memberClients
	for o := range e.Spec.Replicas {
		m, err := e.Member(ctx, o)
		if err != nil {
			_ = mc.Close()
			return nil, fmt.Errorf("retrying client of %s: %w", e.Namespace, err)
		}
		cli, err := e.NewClient(m.ClientURL)
		if err != nil {
			_ = mc.Close()
			return nil, fmt.Errorf("retrying client of %s, member %d: %w", e.Namespace, o, err)
		}
		mc = append(mc, cli)
	}
	return mc, nil
}

func dbSize(ctx context.Context, e *harness.Etcd, ordinal int) (float64, error) {
	text, err := e.Metrics(ctx, ordinal)
	if err != nil {
		return 0, err
	}
	return harness.MetricValue(text, "etcd_mvcc_db_total_size_in_bytes")
}

// tearDown stops the load and deletes the scenario's namespaces.
func (b *bed) tearDown() {
	for _, p := range b.pressure {
		ok, failed := p.Stop()
		b.Facts["pressure puts"] = fmt.Sprintf("%d ok, %d failed", ok, failed)
	}
	for _, cli := range b.clients {
		_ = cli.Close()
	}
	for _, mc := range b.memberClients {
		_ = mc.Close()
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	for _, ns := range b.namespaces {
		if ns == "" {
			continue
		}
		if err := b.c.DeleteNamespace(ctx, ns); err != nil {
			log.Printf("cleaning up %s: %v", ns, err)
		}
	}
}

// opts shapes one rollout.
type rollOpts struct {
	kubeconfig string
	keepOps    bool
	// profilePrefix, when set, makes the engine process write its CPU and heap profiles there
	// (<prefix>.cpu.pprof, <prefix>.heap.pprof).
	profilePrefix string
}

// rollOnce measures one rollout of strategy st (run number run) on every cluster of the bed.
func (b *bed) rollOnce(ctx context.Context, st Strategy, run int, o rollOpts) (r Rollout) {
	r = Rollout{Scenario: b.sc.Name, Strategy: st.Name, Run: run}
	// No rollout may eat the run's budget: the slowest seen took under a minute.
	ctx, cancel := context.WithTimeout(ctx, rolloutTimeout)
	defer cancel()
	began := time.Now()
	defer func() { r.Cycle = time.Since(began) }()
	if err := b.prepare(ctx, st, run, &r); err != nil {
		r.Err = err.Error()
		return r
	}
	r.Prep = time.Since(began)
	samples, startups := b.measure(ctx, st, o, &r)
	b.account(ctx, o, &r, samples, startups)
	return r
}

// prepare starts every cluster of the bed healthy, with a new template and the leader where this run wants
// it, and records the raft terms the roll is measured from.
func (b *bed) prepare(ctx context.Context, st Strategy, run int, r *Rollout) error {
	if b.sc.Pressure > 0 {
		for i, cli := range b.clients {
			if err := compact(ctx, cli); err != nil {
				log.Printf("compacting cluster %d: %v", i, err)
			}
		}
	}
	value := fmt.Sprintf("run%d-%s-%d", run, st.Name, time.Now().UnixNano())
	if err := b.each(ctx, func(i int, e *harness.Etcd) error {
		if err := e.WaitHealthy(ctx); err != nil {
			return err
		}
		if b.sc.MinorChange {
			if _, err := e.ChangeVersion(ctx, minorOfRun(run), harness.StartFaults{}); err != nil {
				return err
			}
		}
		if err := writeTemplate(ctx, b.c.Kube, e, st, "bench.etcd-rollout.test/run", value); err != nil {
			return err
		}
		return e.MoveLeader(ctx, (run+i)%e.Spec.Replicas)
	}); err != nil {
		return fmt.Errorf("preparing: %w", err)
	}
	for i, e := range b.clusters {
		r.LeaderStart = append(r.LeaderStart, (run+i)%e.Spec.Replicas)
	}
	time.Sleep(300 * time.Millisecond) // let the placement transfer settle out of the window
	r.Clusters = make([]ClusterRoll, len(b.clusters))
	for i, e := range b.clusters {
		r.Clusters[i].Namespace = e.Namespace
		term, err := e.RaftTerm(ctx)
		if err != nil {
			return err
		}
		r.Clusters[i].TermBefore = term
		if b.sc.Hang {
			for o := range e.Spec.Replicas {
				if err := e.HangOnTerm(ctx, o, true); err != nil {
					return err
				}
			}
		}
	}
	return nil
}

// measure runs the roll with the background clients and the member monitor going from loadMargin before to
// loadMargin after it, and returns what the monitor saw.
func (b *bed) measure(ctx context.Context, st Strategy, o rollOpts, r *Rollout) ([]Sample, []Startup) {
	every := 50 * time.Millisecond
	if len(b.clusters) > 1 {
		every = 100 * time.Millisecond
	}
	mon := StartMonitor(b.c, b.clusters, every)
	loads := make([]*harness.Load, len(b.clusters))
	r.LoadFrom = time.Now()
	for i, cli := range b.clients {
		loads[i] = harness.StartLoad(ctx, cli, harness.LoadOptions{Key: "bench/probe", Interval: b.sc.LoadInterval,
			Timeout: 500 * time.Millisecond})
	}
	retryLoads := make([]*RetryLoad, len(b.clusters))
	for i, mc := range b.memberClients {
		retryLoads[i] = StartRetryLoad(ctx, mc.put, len(mc), retryProbeKey, b.sc.LoadInterval, defaultRetryPolicy)
	}
	time.Sleep(loadMargin)

	r.Start = time.Now()
	var rollErr error
	if st.Default {
		r.Wall, rollErr = rollDefault(ctx, b.clusters)
	} else {
		rollErr = b.rollWithEngines(ctx, st, o, r)
	}
	r.End = r.Start.Add(r.Wall)
	time.Sleep(loadMargin)
	for i, l := range loads {
		r.Clusters[i].Ops = l.Stop()
	}
	for i, l := range retryLoads {
		r.Clusters[i].RetryWrites = l.Stop()
	}
	r.LoadTo = time.Now()
	if rollErr != nil {
		r.Err = rollErr.Error()
	}
	return mon.Stop()
}

// rollWithEngines rolls every cluster of the bed with the engine, in a process of its own, every scenario:
// its CPU time and peak RSS are the engine's, not the background clients' or the monitor's, which stay in
// this one.
func (b *bed) rollWithEngines(ctx context.Context, st Strategy, o rollOpts, r *Rollout) error {
	var targets []Target
	for _, e := range b.clusters {
		targets = append(targets, targetOf(e))
	}
	er, rollErr := rollWithEnginesInChild(ctx, o.kubeconfig, targets, st, o.profilePrefix, b.sc.Spec.Replicas == 1)
	r.Wall, r.MaxRSSKB, r.EngineCPU, r.GoMemory, r.PeakRSS = er.Wall, er.MaxRSSKB, er.CPU, &er.GoMemory, er.PeakRSS
	r.Profiled = o.profilePrefix != ""
	var errs []error
	for i := range er.Outcomes {
		out := er.Outcomes[i]
		for ci, e := range b.clusters {
			if e.Namespace == out.Target.Namespace {
				r.Clusters[ci].Engine = &out
				r.Clusters[ci].Planned = out.Result.LeaderTransfers
				r.Clusters[ci].Transfers = out.Transfers
			}
		}
		if out.Err != "" {
			errs = append(errs, fmt.Errorf("%s: %s", out.Target.Namespace, out.Err))
		}
	}
	return errors.Join(rollErr, errors.Join(errs...))
}

// account reads what each cluster went through: availability, raft history from the logs, terms, metrics,
// client stats.
func (b *bed) account(ctx context.Context, o rollOpts, r *Rollout, samples []Sample, startups []Startup) {
	var all []harness.Op
	for i, e := range b.clusters {
		cr := &r.Clusters[i]
		cr.Avail = availability(samples, i, e.Spec.Replicas)
		for _, s := range startups {
			if s.Cluster == i {
				cr.Startups = append(cr.Startups, s)
			}
		}
		if err := e.WaitHealthy(ctx); err != nil && r.Err == "" {
			r.Err = "after the roll: " + err.Error()
		}
		if term, err := e.RaftTerm(ctx); err == nil {
			cr.TermAfter = term
		}
		h, err := ReadRaftHistory(b.logs[i], b.ids[i], r.LoadFrom, r.LoadTo)
		if err != nil {
			r.Err = strings.TrimSpace(r.Err + "; " + err.Error())
		}
		cr.Raft = h
		cr.MetricCheck, cr.MetricDetail = metricCheck(ctx, e, b.logs[i])
		cr.Client = clientStats(cr.Ops, r.LoadFrom, r.LoadTo)
		all = append(all, cr.Ops...)
		rs := retryClientStats(cr.RetryWrites)
		cr.RetryClient = &rs
		if !o.keepOps {
			cr.Ops = nil
			cr.RetryWrites = nil
		}
	}
	r.Client = mergeClientStats(r.Clusters, all, r.LoadFrom, r.LoadTo)
	r.RetryClient = mergeRetryClientStats(r.Clusters)
}

// mergeClientStats sums counts over clusters; the worst gap is the worst of any cluster's client, the
// percentiles are over every op.
func mergeClientStats(crs []ClusterRoll, all []harness.Op, from, to time.Time) ClientStats {
	s := clientStats(all, from, to)
	s.WorstGap = 0
	s.WriteErrors = nil
	for _, c := range crs {
		for k, v := range c.Client.WriteErrors {
			if s.WriteErrors == nil {
				s.WriteErrors = map[string]int{}
			}
			s.WriteErrors[k] += v
		}
	}
	for _, c := range crs {
		s.WorstGap = max(s.WorstGap, c.Client.WorstGap)
	}
	return s
}

// metricCheck compares each member's etcd_server_leader_changes_seen_total with the leader changes its
// current process logged.
func metricCheck(ctx context.Context, e *harness.Etcd, logs []string) (bool, string) {
	var bad []string
	for o := range e.Spec.Replicas {
		v, err := e.LeaderChanges(ctx, o)
		if err != nil {
			bad = append(bad, fmt.Sprintf("%d: %v", o, err))
			continue
		}
		n, err := leaderChangesInIncarnation(logs[o])
		if err != nil {
			bad = append(bad, fmt.Sprintf("%d: %v", o, err))
			continue
		}
		if int(v) != n {
			bad = append(bad, fmt.Sprintf("member %d: metric %v, log %d", o, v, n))
		}
	}
	return len(bad) == 0, strings.Join(bad, "; ")
}

// each runs f on every cluster at once.
func (b *bed) each(ctx context.Context, f func(int, *harness.Etcd) error) error {
	var mu sync.Mutex
	var errs []error
	var wg sync.WaitGroup
	for i, e := range b.clusters {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := f(i, e); err != nil {
				mu.Lock()
				errs = append(errs, fmt.Errorf("%s: %w", e.Namespace, err))
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	return errors.Join(errs...)
}

// compact compacts the keyspace to its current revision, so the pressure load's history does not grow the
// database from one rollout to the next.
func compact(ctx context.Context, cli *clientv3.Client) error {
	cctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	resp, err := cli.Get(cctx, "bench/probe")
	if err != nil {
		return err
	}
	_, err = cli.Compact(cctx, resp.Header.Revision)
	return err
}

// minorOfRun is the etcd version run rolls to in a MinorChange scenario: up to 3.6 on even runs, back down to
// 3.5 on odd ones, so that every run changes the minor version.
func minorOfRun(run int) string {
	if run%2 == 0 {
		return "3.6"
	}
	return "3.5"
}
