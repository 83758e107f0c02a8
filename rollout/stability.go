package rollout

import (
	"context"
	"fmt"
	"sync"
	"time"
)

// defaultStableFor is Options.StableFor's default: longer than a crash-looping etcd takes to fail after it
// starts serving, short next to a rollout's cool-down.
const defaultStableFor = 3 * time.Second

// stability turns single health looks into "healthy without a break for stableFor": one good answer proves
// little about a member that crash-loops (it answers for a moment after each start). A break starts the
// count again and is remembered, so the gate's last-seen says the member flapped, not merely that it is
// down.
type stability struct {
	stableFor time.Duration
	since     time.Time // start of the current healthy stretch; zero while unhealthy
	breaks    int       // healthy stretches that ended before stableFor
}

func (s *stability) observe(ok bool, seen string) (bool, string, error) {
	if !ok {
		if !s.since.IsZero() {
			s.breaks++
			s.since = time.Time{}
		}
		if s.breaks > 0 {
			seen = fmt.Sprintf("%s (it was healthy %d time(s) since it started, never for %s)", seen, s.breaks, s.stableFor)
		}
		return false, seen, nil
	}
	if s.since.IsZero() {
		s.since = time.Now()
	}
	if held := time.Since(s.since); held < s.stableFor {
		seen = fmt.Sprintf("healthy for %s of the %s it must stay so", held.Round(100*time.Millisecond), s.stableFor)
		if s.breaks > 0 {
			// The gate may time out in a healthy moment of a flapping member: say it flapped all the same.
			seen = fmt.Sprintf("%s (it was healthy %d time(s) before, never for %s)", seen, s.breaks, s.stableFor)
		}
		return false, seen, nil
	}
	return true, "", nil
}

// provenRevisions are the revisions on which a member passed its etcd gate with the full stability window.
// A crash-looping revision shows on its first member (the canary), so later members on a proven revision pass
// on etcd's first healthy answer, and what is left of the risk (one member flapping for reasons of its own) is
// what the cool-down's watch of rolled members covers: with the default 30 s cool-down, far longer than the
// window. Without it, each member paid stableFor, which made a cool-down-0 roll of 3 members 9 s slower than
// the default StatefulSet roll (bench/results.md).
type provenRevisions struct {
	mu   sync.Mutex
	revs map[string]bool
}

func (p *provenRevisions) has(rev string) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return rev != "" && p.revs[rev]
}

func (p *provenRevisions) add(rev string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.revs == nil {
		p.revs = map[string]bool{}
	}
	p.revs[rev] = true
}

// stillAnswers is the light look at members this run already rolled, taken while it cools down. Only the
// member's own failure counts: one that stops answering did not stay up on the new revision. A member that
// answers but sees no leader is waiting out an election elsewhere (a crashed leader), which the run holds
// for like any blocked state.
func (e *Engine) stillAnswers(ctx context.Context, pod string) (bool, string) {
	cctx, cancel := context.WithTimeout(ctx, memberCallTimeout)
	defer cancel()
	if _, err := e.etcd.Status(cctx, pod); err != nil {
		return false, err.Error()
	}
	return true, ""
}
