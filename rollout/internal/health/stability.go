// Package health judges, look by look, whether a member stayed healthy: etcd's answers held for a window in
// one etcd process (Stability), and the kubelet's account of its pod (PodWitness). The engine's gates feed
// them; what they say decides whether a member passed, failed, or is unknown.
package health

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/etcd-rollout/pulumi-etcd-rollout/rollout/internal/planner"
	"github.com/etcd-rollout/pulumi-etcd-rollout/rollout/internal/process"
)

// DefaultStableFor is Options.StableFor's default: longer than a crash-looping etcd takes to fail after it
// starts serving, short next to a rollout's cool-down.
const DefaultStableFor = 3 * time.Second

// Stability turns single health looks into "healthy without a break for stableFor": one good answer proves
// little about a member that crash-loops (it answers for a moment after each start). A break starts the
// count again and is remembered, so the gate's last-seen says the member flapped, not merely that it is
// down.
//
// A break is the member's own failure, or a restart: the stretch remembers the etcd process that began it
// (its incarnation) and checks it again when the window ends, so a member that restarted between two looks
// breaks too. A look that could not reach the member at all (member.ErrNoLook: its port-forward ended or could not
// be opened) does not break it: the stretch holds until etcd answers again and shows the same process.
// Without an incarnation (etcd did not say) such a look breaks the stretch, as any failed look.
type Stability struct {
	StableFor time.Duration
	// IncarnationOf reads the member's incarnation (member.Clients.Incarnation).
	IncarnationOf func(context.Context) (process.Incarnation, error)

	since       time.Time           // start of the current healthy stretch; zero while unhealthy
	Breaks      int                 // healthy stretches that ended before StableFor
	Incarnation process.Incarnation // the etcd process of the current stretch; zero when not known
	unsure      bool                // a look since the last good one could not reach the member
	// lastReachedOK says the last look that reached the member found it healthy (looks that did not reach
	// it, or its leader, say nothing either way).
	lastReachedOK bool
}

// Look is one health look at a member: whether it passed, what was seen, for a person, and why it did not
// pass, for code. NoLook says it never reached etcd (member.ErrNoLook).
type Look struct {
	OK     bool
	Seen   string
	NoLook bool
	Reason planner.ProblemReason
}

// Observe takes one look: whether the member has now been healthy for the whole window, and what was seen.
func (s *Stability) Observe(ctx context.Context, l Look) (bool, string, error) {
	if !l.OK {
		if l.NoLook && !s.since.IsZero() && s.Incarnation.Known() {
			s.unsure = true
			return false, l.Seen + "; the healthy stretch holds until etcd answers again from the same process", nil
		}
		if !l.NoLook {
			s.lastReachedOK = false
		}
		return false, s.broken(l.Seen), nil
	}
	s.lastReachedOK = true
	if s.since.IsZero() {
		now := time.Now()
		inc, err := s.IncarnationOf(ctx)
		if err != nil && !errors.Is(err, process.ErrUnnamed) {
			// Which process answered is not known, so a stretch started on it could span restarts unseen: a
			// crash loop whose health looks all land in its up moments (the schedule checker's seed 1142 of
			// 10,000, with requests late by up to 200 ms, passed a fast crash loop). The stretch starts on a look
			// whose process is named; an etcd that never names it is judged on its looks alone, as before.
			return false, "answers; reading which etcd process serves: " + err.Error(), nil
		}
		s.since, s.unsure, s.Incarnation = now, false, inc
	} else if s.unsure || time.Since(s.since) >= s.StableFor {
		if seen := s.checkSameProcess(ctx); seen != "" {
			return false, seen, nil
		}
	}
	if held := time.Since(s.since); held < s.StableFor {
		seen := fmt.Sprintf("healthy for %s of the %s it must stay so", held.Round(100*time.Millisecond), s.StableFor)
		if s.Breaks > 0 {
			// The gate may time out in a healthy moment of a flapping member: say it flapped all the same.
			seen = fmt.Sprintf("%s (it was healthy %d time(s) before, never for %s)", seen, s.Breaks, s.StableFor)
		}
		return false, seen, nil
	}
	return true, "", nil
}

// Verdict says whether the looks so far judge the member: it broke a healthy stretch (by its own answer or a
// new process), or the last look that reached it found it failing. A member that only ever failed before its
// first healthy look (starting up) and has answered healthy since, with looks that did not reach it or its
// leader in between, has not been judged: a gate that runs out of time on it is no verdict on the revision.
func (s *Stability) Verdict() bool { return s.Breaks > 0 || !s.lastReachedOK }

// broken ends the current stretch on a failed look and says what was seen.
func (s *Stability) broken(seen string) string {
	if !s.since.IsZero() {
		s.Breaks++
		s.since, s.Incarnation, s.unsure = time.Time{}, process.Incarnation{}, false
	}
	if s.Breaks > 0 {
		seen = fmt.Sprintf("%s (it was healthy %d time(s) since it started, never for %s)", seen, s.Breaks, s.StableFor)
	}
	return seen
}

// checkSameProcess checks that the stretch's etcd process still serves. It returns "" when it does (or when
// the stretch has no incarnation to check). Otherwise it says what it found: a new process (a break: the
// stretch starts again from it), or no answer to the check (the stretch waits for the next look).
func (s *Stability) checkSameProcess(ctx context.Context) string {
	if !s.Incarnation.Known() {
		s.unsure = false
		return ""
	}
	now, err := s.IncarnationOf(ctx)
	switch {
	case err != nil:
		return fmt.Sprintf("answers; checking that the same etcd process serves: %v", err)
	case !now.Same(s.Incarnation):
		was := s.Incarnation
		s.Breaks++
		s.since, s.Incarnation, s.unsure = time.Now(), now, false
		return fmt.Sprintf("restarted during its healthy stretch (etcd process started at %s, was %s)%s", now, was, s.flapped())
	}
	s.unsure = false
	return ""
}

// flapped says, for a member that broke before, how often.
func (s *Stability) flapped() string {
	if s.Breaks == 0 {
		return ""
	}
	return fmt.Sprintf(" (it was healthy %d time(s) since it started, never for %s)", s.Breaks, s.StableFor)
}

// ProvenRevisions are the revisions on which a member passed its etcd gate with the full Stability window.
// A crash-looping revision shows on its first member (the canary), so later members on a proven revision pass
// on etcd's first healthy answer, and what is left of the risk (one member flapping for reasons of its own) is
// what the cool-down's watch of rolled members covers: with the default 30 s cool-down, far longer than the
// window. Without it, each member paid stableFor, which made a cool-down-0 roll of 3 members 9 s slower than
// the default StatefulSet roll (bench/results.md).
type ProvenRevisions struct {
	mu   sync.Mutex
	revs map[string]bool
}

// Has says a member passed on rev with the full window.
func (p *ProvenRevisions) Has(rev string) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return rev != "" && p.revs[rev]
}

// Add records that a member passed on rev with the full window.
func (p *ProvenRevisions) Add(rev string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.revs == nil {
		p.revs = map[string]bool{}
	}
	p.revs[rev] = true
}

// Remove forgets rev: a member that passed on it did not stay up.
func (p *ProvenRevisions) Remove(rev string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	delete(p.revs, rev)
}
