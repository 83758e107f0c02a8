//go:build faults

// Package faults_test breaks things during a rollout on the local cluster of `make cluster-up` — a real
// kube-apiserver and StatefulSet controller, real etcd members behind the pods — and checks the promises of
// the README each time: a background client's history is linearizable (porcupine), the partition is back at
// replicas, every member is where it should be, and the error says what happened and what to do. The tests
// fail, never skip, when the cluster is not up.
package faults_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"regexp"
	"testing"
	"time"

	"github.com/anishathalye/porcupine"
	"github.com/go-logr/logr"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2"

	"github.com/etcd-rollout/pulumi-etcd-rollout/rollout"
	"github.com/etcd-rollout/pulumi-etcd-rollout/tests/harness"
)

// TestMain silences client-go's klog: every member restart closes port-forward streams, and client-go
// reports each one on stderr, which would bury the test output.
func TestMain(m *testing.M) {
	klog.SetLogger(logr.Discard())
	os.Exit(m.Run())
}

// The HTTP production shape of tests/manifests, with a short grace period so a member that outlives its
// SIGTERM is killed after 5s instead of 30s.
var httpSpec = harness.EtcdSpec{Name: "etcd", ServiceName: "etcd-headless", GracePeriod: 5 * time.Second}

// historyDirEnv overrides where a failed linearizability check keeps its history.
const historyDirEnv = "FAULTS_HISTORY_DIR"

type fixture struct {
	t    *testing.T
	c    *harness.Cluster
	etcd *harness.Etcd
	must harness.MustEtcd
	rec  *harness.Recorder
	// recStart is taken just before the recorder starts: a history op happened at recStart + its Call.
	recStart time.Time
}

// minAckedPuts is how many acknowledged puts a history needs before it is judged: with fewer, the check
// (and its stale-read control) says little.
const minAckedPuts = 20

// newFixture creates a 3-member etcd in a fresh namespace and starts the background client, whose history
// is checked for linearizability when the test ends (before the namespace goes).
func newFixture(t *testing.T) *fixture {
	t.Helper()
	return newFixtureOf(t, httpSpec)
}

// newFixtureOf is newFixture for another spec, such as httpSpec on an older etcd version.
func newFixtureOf(t *testing.T, spec harness.EtcdSpec) *fixture {
	t.Helper()
	c := harness.Connect(t)
	ns := c.Namespace(t)
	e := c.MustCreateEtcd(t, ns, spec)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cli, err := e.Client(ctx)
	require.NoError(t, err)
	f := &fixture{t: t, c: c, etcd: e, must: e.Must(t), recStart: time.Now()}
	f.rec = harness.StartRecorder(context.Background(), cli, harness.RecorderOptions{})
	t.Cleanup(func() {
		// A case that ends quickly has not given the client much time: let it run until its history can be
		// judged (the stale-read control needs a get after two sequential acknowledged puts on one key), so
		// no verdict depends on how fast the case was.
		f.waitHistory(time.Time{}, minAckedPuts, 30*time.Second)
		ops := f.rec.Stop()
		_ = cli.Close()
		f.checkHistory(t, ops)
	})
	f.waitReachable()
	return f
}

// waitHistory waits up to limit until the background client has recorded, since since (zero: since it
// started), at least puts acknowledged puts and a get, and a history the stale-read control can use. It
// says whether it got there.
func (f *fixture) waitHistory(since time.Time, puts int, limit time.Duration) bool {
	deadline := time.Now().Add(limit)
	for {
		ops := f.rec.Ops()
		var recent []harness.HistoryOp
		for _, op := range ops {
			if f.recStart.Add(op.Call).After(since) {
				recent = append(recent, op)
			}
		}
		sum := harness.SummarizeHistory(recent)
		_, judgeable := withStaleRead(ops)
		if sum.Puts >= puts && sum.Gets > 0 && judgeable {
			return true
		}
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// waitReachable waits until the engine's own path (port-forwards through the API server and kwok) reaches
// every member: the harness's health check dials the members directly. Right after an API server restart,
// kwok may take a while to see the forwards of new pods, and a fault case must start from a cluster the
// engine can see.
func (f *fixture) waitReachable() {
	f.t.Helper()
	probe := f.engine(func(_ *rollout.Config, o *rollout.Options) { o.OnEvent = nil })
	start := time.Now()
	var last string
	reached := assert.Eventually(f.t, func() bool {
		ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
		defer cancel()
		st, err := probe.Observe(ctx)
		if err != nil {
			last = err.Error()
			return false
		}
		for _, m := range st.Members {
			if !m.Healthy {
				last = m.Pod + ": " + m.Problem
				return false
			}
		}
		return true
	}, 2*time.Minute, 500*time.Millisecond)
	// last is read after the wait: a message argument would be evaluated before the first look.
	require.True(f.t, reached, "the engine's port-forwards never reached every member (last: %s)", last)
	if d := time.Since(start); d > 2*time.Second {
		f.t.Logf("port-forwards reached every member after %s", d.Round(100*time.Millisecond))
	}
}

// checkHistory fails the test when the history is not linearizable (or the check could not finish), and
// then keeps the history and porcupine's visualization under a path it prints.
func (f *fixture) checkHistory(t *testing.T, ops []harness.HistoryOp) {
	sum := harness.SummarizeHistory(ops)
	if sum.Puts == 0 || sum.Gets == 0 {
		t.Errorf("background client recorded %s: nothing to check", sum)
		return
	}
	start := time.Now()
	check := harness.CheckLinearizable(ops, 2*time.Minute)
	t.Logf("background client: %s; porcupine checked %d ops in %s: %s", sum, check.Ops, time.Since(start).Round(time.Millisecond), check.Result)
	if check.Result == porcupine.Ok {
		// A check that cannot fail proves nothing: the same history with one stale read injected must be
		// rejected.
		if stale, ok := withStaleRead(ops); ok {
			if got := harness.CheckLinearizable(stale, 2*time.Minute).Result; got != porcupine.Illegal {
				t.Errorf("the linearizability check accepted this history with a stale read injected (%s): it cannot fail", got)
			}
		} else {
			t.Errorf("the history has no get after two sequential acknowledged puts on its key: too short to check")
		}
		return
	}
	dir := os.Getenv(historyDirEnv)
	if dir == "" {
		root, err := harness.RepoRoot()
		require.NoError(t, err)
		dir = filepath.Join(root, "tests", ".run", "faults")
	}
	dir = filepath.Join(dir, regexp.MustCompile(`[^A-Za-z0-9_.-]+`).ReplaceAllString(t.Name(), "_")+"-"+time.Now().Format("150405"))
	if err := harness.KeepHistory(dir, ops, check); err != nil {
		t.Errorf("history is %s (not linearizable or not decided) and could not be kept: %v", check.Result, err)
		return
	}
	t.Errorf("the background client's history is %s, not linearizable: an acknowledged write was lost or a read was stale; history and visualization kept in %s (open history.html)", check.Result, dir)
}

// withStaleRead copies ops and makes the last get read a value that was overwritten before it began: put
// P1 returned before put P2 was called, P2 returned before the get was called, yet the get returns P1's
// value. Values are unique, so no linearization explains it.
func withStaleRead(ops []harness.HistoryOp) ([]harness.HistoryOp, bool) {
	out := append([]harness.HistoryOp(nil), ops...)
	for g := len(out) - 1; g >= 0; g-- {
		get := out[g]
		if get.Kind != harness.OpGet {
			continue
		}
		var p1, p2 *harness.HistoryOp
		for i := range out {
			p := &out[i]
			if p.Kind != harness.OpPut || p.Outcome != harness.OutcomeOK || p.Key != get.Key || p.Return >= get.Call {
				continue
			}
			if p2 == nil || p.Call > p2.Call {
				p2 = p
			}
		}
		if p2 == nil {
			continue
		}
		for i := range out {
			p := &out[i]
			if p.Kind == harness.OpPut && p.Outcome == harness.OutcomeOK && p.Key == get.Key && p.Return < p2.Call && p.Value != get.Value {
				p1 = p
				break
			}
		}
		if p1 == nil {
			continue
		}
		out[g].Value = p1.Value
		return out, true
	}
	return nil, false
}

// engine builds the engine under test with the harness's test settings.
func (f *fixture) engine(mutate func(*rollout.Config, *rollout.Options)) *rollout.Engine {
	f.t.Helper()
	return f.must.Engine(mutate)
}

// runRefusedUntouched places the leader on etcd-2, the first member a plan restarts, runs the engine, and
// checks that the run was refused at once and touched nothing: no pod restarted, the partition locked, no
// leader moved (a move for a restart that will not happen is a write pause and a term for nothing), the raft
// term unchanged. It returns the run's error, for the caller to say what refused it.
func (f *fixture) runRefusedUntouched(ctx context.Context) error {
	f.t.Helper()
	f.must.PlaceLeader(2)
	_, uids := f.must.Pods()
	term := f.must.Term()
	res, err := f.engine(nil).Run(ctx)
	require.Error(f.t, err)
	assert.False(f.t, errors.Is(err, rollout.ErrBlocked), "not waited for: refused at once")
	_, after := f.must.Pods()
	assert.Equal(f.t, uids, after, "no pod restarted")
	assert.Equal(f.t, f.etcd.Spec.Replicas, f.must.Partition(), "partition locked")
	assert.Zero(f.t, res.LeaderTransfers, "no leader moved for a restart that is refused")
	assert.Equal(f.t, term, f.must.Term(), "the raft term did not move")
	return err
}

// requireState checks what every case promises at its end: the partition at replicas, and each ordinal
// at rev exactly when wantAt says so; then etcd healthy by the harness's own check.
func (f *fixture) requireState(rev string, wantAt ...bool) {
	f.t.Helper()
	require.Equal(f.t, f.etcd.Spec.Replicas, f.must.Partition(), "partition back at replicas")
	revs, _ := f.must.Pods()
	for i, r := range revs {
		at := len(wantAt) == 0 || wantAt[i]
		if at {
			require.Equal(f.t, rev, r, "pod %d should be at the update revision", i)
		} else {
			require.NotEqual(f.t, rev, r, "pod %d should not have been rolled", i)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	require.NoError(f.t, f.etcd.WaitHealthy(ctx))
}

// restarted compares two UID snapshots: which ordinals got a new pod.
func restarted(before, after []types.UID) []int {
	var out []int
	for i := range before {
		if before[i] != after[i] {
			out = append(out, i)
		}
	}
	return out
}

func runCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	t.Cleanup(cancel)
	return ctx
}
