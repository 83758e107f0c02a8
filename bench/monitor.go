package main

import (
	"context"
	"net/http"
	"sync"
	"time"

	"github.com/etcd-rollout/pulumi-etcd-rollout/tests/harness"
	"github.com/etcd-rollout/pulumi-etcd-rollout/tests/harness/memberapi"
)

// Monitor samples whether each member of some clusters can take part in Raft, to find quorum loss and how
// long each member was out. Pod Ready is not the signal (it is what the default roll trusts); a member is in
// when its process lives and has answered /livez since it started (etcd serves /livez once its server runs,
// so a member still opening its database or replaying its WAL is out), and out from the moment its process
// got SIGTERM (unless it ignores SIGTERM: then it serves until SIGKILL) until its next process passed /livez.
type Monitor struct {
	c        *harness.Cluster
	clusters []*harness.Etcd
	every    time.Duration
	http     *http.Client

	mu      sync.Mutex
	samples []Sample
	// livez remembers, per member key, the pid whose /livez passed and when.
	livez map[string]livezPass
	// startups records, per process that came up during the window, how long from its start to /livez.
	startups []Startup

	cancel context.CancelFunc
	done   chan struct{}
}

type livezPass struct {
	pid int
	at  time.Time
}

// Sample is one look at every monitored member: Up[cluster][ordinal].
type Sample struct {
	T  time.Time
	Up [][]bool
}

// Startup is how long a member process took from start to answering /livez.
type Startup struct {
	Cluster, Ordinal int
	Took             time.Duration
}

// StartMonitor begins sampling every interval until Stop.
func StartMonitor(c *harness.Cluster, clusters []*harness.Etcd, every time.Duration) *Monitor {
	m := &Monitor{c: c, clusters: clusters, every: every, http: &http.Client{Timeout: 300 * time.Millisecond},
		livez: map[string]livezPass{}, done: make(chan struct{})}
	ctx, cancel := context.WithCancel(context.Background())
	m.cancel = cancel
	go m.loop(ctx)
	return m
}

func (m *Monitor) loop(ctx context.Context) {
	defer close(m.done)
	t := time.NewTicker(m.every)
	defer t.Stop()
	for {
		m.sample(ctx)
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

func (m *Monitor) sample(ctx context.Context) {
	all, err := m.c.Members.Members(ctx)
	now := time.Now()
	if err != nil {
		return // a missed sample: the next one covers the same state
	}
	byKey := map[string]memberapi.Member{}
	for _, mb := range all {
		byKey[mb.Namespace+"/"+mb.Pod] = mb
	}
	s := Sample{T: now, Up: make([][]bool, len(m.clusters))}
	var wg sync.WaitGroup
	var mu sync.Mutex
	for ci, e := range m.clusters {
		s.Up[ci] = make([]bool, e.Spec.Replicas)
		for o := range e.Spec.Replicas {
			key := e.Namespace + "/" + e.PodName(o)
			mb, ok := byKey[key]
			alive := ok && mb.PID != 0 && (mb.State == memberapi.StateRunning ||
				(mb.State == memberapi.StateTerminating && mb.HangOnTerm))
			if !alive {
				continue
			}
			m.mu.Lock()
			pass, seen := m.livez[key]
			m.mu.Unlock()
			if seen && pass.pid == mb.PID {
				s.Up[ci][o] = true
				continue
			}
			wg.Add(1)
			go func() {
				defer wg.Done()
				if !m.livezOK(ctx, mb.MetricsURL) {
					return
				}
				at := time.Now()
				mu.Lock()
				s.Up[ci][o] = true
				mu.Unlock()
				m.mu.Lock()
				m.livez[key] = livezPass{pid: mb.PID, at: at}
				if seen && !mb.StartedAt.IsZero() { // a restart seen by this monitor, not its first look
					m.startups = append(m.startups, Startup{Cluster: ci, Ordinal: o, Took: at.Sub(mb.StartedAt)})
				}
				m.mu.Unlock()
			}()
		}
	}
	wg.Wait()
	m.mu.Lock()
	m.samples = append(m.samples, s)
	m.mu.Unlock()
}

func (m *Monitor) livezOK(ctx context.Context, base string) bool {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, base+"/livez", nil)
	if err != nil {
		return false
	}
	resp, err := m.http.Do(req)
	if err != nil {
		return false
	}
	resp.Body.Close()
	return resp.StatusCode == http.StatusOK
}

// Stop ends sampling and returns the samples and the restarts' startup times.
func (m *Monitor) Stop() ([]Sample, []Startup) {
	m.cancel()
	<-m.done
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.samples, m.startups
}

// Interval is a span of time.
type Interval struct {
	From time.Time `json:"from"`
	To   time.Time `json:"to"`
}

// Len is the interval's length.
func (i Interval) Len() time.Duration { return i.To.Sub(i.From) }

// Availability is what the samples of one cluster say.
type Availability struct {
	// Down lists, per ordinal, the spans in which the member was out.
	Down [][]Interval `json:"down"`
	// QuorumLost lists the spans in which fewer than a quorum of members were in.
	QuorumLost []Interval `json:"quorumLost"`
}

// QuorumLostFor is the total time without quorum.
func (a Availability) QuorumLostFor() time.Duration {
	var d time.Duration
	for _, i := range a.QuorumLost {
		d += i.Len()
	}
	return d
}

// DownFor is the total time each member was out, by ordinal.
func (a Availability) DownFor() []time.Duration {
	out := make([]time.Duration, len(a.Down))
	for o, spans := range a.Down {
		for _, i := range spans {
			out[o] += i.Len()
		}
	}
	return out
}

// availability turns the samples of cluster ci into spans. A state holds from its sample to the next one,
// so the resolution is the sampling interval.
func availability(samples []Sample, ci, replicas int) Availability {
	a := Availability{Down: make([][]Interval, replicas)}
	quorum := replicas/2 + 1
	open := make([]*Interval, replicas)
	var lost *Interval
	for k, s := range samples {
		end := s.T
		if k+1 < len(samples) {
			end = samples[k+1].T
		}
		up := 0
		for o := range replicas {
			if s.Up[ci][o] {
				up++
				if open[o] != nil {
					a.Down[o] = append(a.Down[o], *open[o])
					open[o] = nil
				}
				continue
			}
			if open[o] == nil {
				open[o] = &Interval{From: s.T}
			}
			open[o].To = end
		}
		if up < quorum {
			if lost == nil {
				lost = &Interval{From: s.T}
			}
			lost.To = end
		} else if lost != nil {
			a.QuorumLost = append(a.QuorumLost, *lost)
			lost = nil
		}
	}
	for o := range replicas {
		if open[o] != nil {
			a.Down[o] = append(a.Down[o], *open[o])
		}
	}
	if lost != nil {
		a.QuorumLost = append(a.QuorumLost, *lost)
	}
	return a
}
