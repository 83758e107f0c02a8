package rollout

import (
	"context"
	"errors"
	"fmt"
	"os"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"
)

// TestSchedules runs the executor through many randomized schedules (schedule_gen_test.go) against the unit
// fakes and checks, from the fakes' truth, after every request of every engine and at every run's return:
//
//	(a) one member disrupted at a time: no member is restarted or deleted by our write while another that our
//	    writes disrupted is not back healthy, and no partition write exposes two members at once;
//	(b) no pod delete and no partition lowering unless the other members keep quorum, counting the members
//	    that are truly up (not those that merely answer us);
//	(c) the partition is locked at every return of a run that lowered it and was not SIGKILLed, and a
//	    partition a SIGKILLed run left lowered is locked before anybody disrupts anything;
//	(d) no disruption (leader transfer, partition lowering, pod delete, re-lock of a partition another run
//	    lowered) by a run that does not hold the Lease;
//	(e) nothing reported that was not measured: the unplanned elections a run reports are those the fake
//	    counted, and the members it reports rolled are at its revision and up;
//	(f) no member failed without a cause: a run that fails a member as its own failure (what a revert
//	    reverts) does so only for a member the schedule crashed, looped or cut off, or under a fault that
//	    may reach any member (a revision that crash-loops, an outage, a second engine);
//	(g) a member whose data dies with its pod never comes back with an empty data dir under the member ID
//	    that voted before (schedule.Ephemeral);
//	(s) in a minor upgrade (schedule.MinorUpgrade, 3.5 → 3.6) nothing is disrupted before a snapshot that
//	    passes its check (etcd's sha256, bbolt's) is stored, judged by the files, not by what a run says.
//
// A fault counts against an engine only once its own requests could have shown it (answerable in
// schedule_invariants_test.go), so a violation is a breach a correct engine would not commit.
//
// Environment:
//
//	ROLLOUT_SCHEDULES=N          run N seeds (default 10,000, 1,000 with -short; 100,000 before a release:
//	                             make test-schedules-long)
//	ROLLOUT_SCHEDULE_FROM=F      starting at seed F (default 1), to explore beyond the default seeds
//	ROLLOUT_SCHEDULE_SEED=S      run only seed S (a replay)
//	ROLLOUT_SCHEDULE_EVENTS=k,.. inject only these kinds (template, crash, crashloop, unreachable, outage, delete,
//	                             second, cancel, kill; "none" for none); default all
//	ROLLOUT_SCHEDULE_PARALLEL=P  schedules at once (default GOMAXPROCS: on virtual time a schedule only computes)
//	ROLLOUT_SCHEDULE_VERBOSE=1   print the account of every schedule, not only of failing ones
//
// Replays: every schedule runs in a testing/synctest bubble, on a virtual clock that moves only when every
// goroutine of the schedule waits, and a sequencer serves the engines' requests one at a time in an order fixed
// by the seed (schedule_sequencer_test.go). A seed therefore plays out the same on any machine, under any load:
// TestSchedulesReplayAlike runs seeds twice, once beside a busy loop, and compares their accounts line by line.
// A failing seed prints its schedule, its account and the one command that replays it.
func TestSchedules(t *testing.T) {
	kinds := scheduleKinds(t)
	seeds := scheduleSeeds(t)
	parallel := envInt(t, "ROLLOUT_SCHEDULE_PARALLEL", runtime.GOMAXPROCS(0))
	started := time.Now()

	var mu sync.Mutex
	byInvariant := map[string][]string{}
	drawn, fired := map[eventKind]int{}, map[eventKind]int{}
	failed := 0
	next := make(chan uint64)
	var wg sync.WaitGroup
	for i := 0; i < parallel; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for seed := range next {
				t.Run(fmt.Sprintf("seed=%d", seed), func(t *testing.T) {
					s := generateSchedule(seed, kinds)
					var w *world
					synctest.Test(t, func(t *testing.T) { w = runSchedule(t, s) })
					mu.Lock()
					defer mu.Unlock()
					for i, ev := range s.Events {
						drawn[ev.Kind]++
						if w.fired[i] {
							fired[ev.Kind]++
						}
					}
					if len(w.violations) == 0 {
						if os.Getenv("ROLLOUT_SCHEDULE_VERBOSE") != "" {
							t.Logf("schedule kept every invariant:\n%s", w.report(kinds))
						}
						return
					}
					failed++
					for _, inv := range violatedInvariants(w.violations) {
						byInvariant[inv] = append(byInvariant[inv], strconv.FormatUint(seed, 10))
					}
					t.Errorf("schedule breaks the non-negotiables:\n%s", w.report(kinds))
				})
			}
		}()
	}
	for _, s := range seeds {
		next <- s
	}
	close(next)
	wg.Wait()
	var found []string
	for _, inv := range sortedKeys(setOf(byInvariantKeys(byInvariant))) {
		found = append(found, fmt.Sprintf("(%s) in seeds %s", inv, strings.Join(byInvariant[inv], " ")))
	}
	var injected []string
	for _, k := range kinds {
		injected = append(injected, fmt.Sprintf("%s %d/%d", k, fired[k], drawn[k]))
	}
	t.Logf("%d schedules ran in %s; events injected/drawn: %s; %d broke an invariant: %s", len(seeds), time.Since(started).Round(100*time.Millisecond),
		strings.Join(injected, ", "), failed, strings.Join(found, ", "))
}

// runSchedule plays s on a fresh world: run 1, then a fresh engine (another holder) for every run that did not
// succeed, up to s.Runs; a second engine started by an event is waited for before the next run.
func runSchedule(t *testing.T, s schedule) *world {
	w := newWorld(t, s)
	w.startSequencer()
	for r := 1; r <= s.Runs; r++ {
		se := w.newEngine(fmt.Sprintf("run-%d", r), r)
		_, err := w.runEngine(se)
		w.wg.Wait()
		if err == nil {
			break
		}
	}
	w.stopSequencer()
	w.mu.Lock()
	for i, ev := range s.Events {
		if !w.fired[i] {
			w.logf("world", "not reached: %s", ev)
		}
	}
	w.mu.Unlock()
	w.cancel()
	return w
}

// runEngine runs se's engine to its return and judges the return.
func (w *world) runEngine(se *schedEngine) (Result, error) {
	defer func() { _ = se.e.Close() }()
	defer se.cancel()
	w.mu.Lock()
	se.elStart, se.startedAt = w.electionsNow(), w.now()
	w.mu.Unlock()
	res, err := se.e.Run(se.ctx)
	w.mu.Lock()
	defer w.mu.Unlock()
	if se.killed {
		w.logf(se.name, "returned after its SIGKILL (not judged)")
		return res, err
	}
	if errors.Is(se.ctx.Err(), context.DeadlineExceeded) {
		w.logf(se.name, "did not return within %s: cancelled by the guard", scheduleGuard)
	}
	w.logf(se.name, "returned: error %v; result: %s", err, res.Summary())
	w.checkExit(se, res, err)
	return res, err
}

// startSecond starts a second engine, another holder, overlapping the current run; w.mu is held.
func (w *world) startSecond() {
	w.seconds++
	name := fmt.Sprintf("second-%d", w.seconds)
	w.wg.Add(1)
	go func() {
		defer w.wg.Done()
		_, _ = w.runEngine(w.newEngine(name, 0))
	}()
}

func violatedInvariants(vs []violation) []string {
	seen := map[string]bool{}
	for _, v := range vs {
		seen[v.invariant] = true
	}
	return sortedKeys(seen)
}

func byInvariantKeys(m map[string][]string) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	return out
}

func setOf(keys []string) map[string]bool {
	out := map[string]bool{}
	for _, k := range keys {
		out[k] = true
	}
	return out
}

// scheduleKinds reads ROLLOUT_SCHEDULE_EVENTS.
func scheduleKinds(t *testing.T) []eventKind {
	v := strings.TrimSpace(os.Getenv("ROLLOUT_SCHEDULE_EVENTS"))
	switch v {
	case "":
		return allEventKinds
	case "none":
		return nil
	}
	var out []eventKind
	for _, name := range strings.Split(v, ",") {
		k := eventKind(strings.TrimSpace(name))
		if !slices.Contains(allEventKinds, k) {
			t.Fatalf("ROLLOUT_SCHEDULE_EVENTS: unknown event kind %q (known: %s)", k, kindNames(allEventKinds))
		}
		out = append(out, k)
	}
	return out
}

func kindNames(kinds []eventKind) string {
	if len(kinds) == 0 {
		return "none"
	}
	names := make([]string, 0, len(kinds))
	for _, k := range kinds {
		names = append(names, string(k))
	}
	return strings.Join(names, ",")
}

// scheduleSeeds reads ROLLOUT_SCHEDULE_SEED, ROLLOUT_SCHEDULES and ROLLOUT_SCHEDULE_FROM.
func scheduleSeeds(t *testing.T) []uint64 {
	if v := os.Getenv("ROLLOUT_SCHEDULE_SEED"); v != "" {
		seed, err := strconv.ParseUint(v, 10, 64)
		if err != nil {
			t.Fatalf("ROLLOUT_SCHEDULE_SEED=%q: %v", v, err)
		}
		return []uint64{seed}
	}
	n := 10000
	if testing.Short() {
		n = 1000
	}
	n = envInt(t, "ROLLOUT_SCHEDULES", n)
	from := envInt(t, "ROLLOUT_SCHEDULE_FROM", 1)
	seeds := make([]uint64, 0, n+len(longModeFinds))
	for i := 0; i < n; i++ {
		seeds = append(seeds, uint64(from+i))
	}
	for _, seed := range longModeFinds {
		if seed < uint64(from) || seed >= uint64(from+n) {
			seeds = append(seeds, seed)
		}
	}
	return seeds
}

// longModeFinds are seeds beyond the default range whose schedules found a defect, run with every range so
// that the fix stays in `make test`: 21468, a member a leader move's looks found down after it passed was
// reported rolled; 23815, the first try at that fix disrupted another member beside it.
var longModeFinds = []uint64{21468, 23815}

func envInt(t *testing.T, name string, def int) int {
	v := os.Getenv(name)
	if v == "" {
		return def
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 1 {
		t.Fatalf("%s=%q: want a positive number", name, v)
	}
	return n
}
