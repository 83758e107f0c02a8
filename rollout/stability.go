package rollout

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/etcd-rollout/pulumi-etcd-rollout/rollout/internal/member"
)

// defaultStableFor is Options.StableFor's default: longer than a crash-looping etcd takes to fail after it
// starts serving, short next to a rollout's cool-down.
const defaultStableFor = 3 * time.Second

// stability turns single health looks into "healthy without a break for stableFor": one good answer proves
// little about a member that crash-loops (it answers for a moment after each start). A break starts the
// count again and is remembered, so the gate's last-seen says the member flapped, not merely that it is
// down.
//
// A break is the member's own failure, or a restart: the stretch remembers the etcd process that began it
// (its incarnation) and checks it again when the window ends, so a member that restarted between two looks
// breaks too. A look that could not reach the member at all (member.ErrNoLook: its port-forward ended or could not
// be opened) does not break it: the stretch holds until etcd answers again and shows the same process.
// Without an incarnation (etcd did not say) such a look breaks the stretch, as any failed look.
type stability struct {
	stableFor time.Duration
	// incarnationOf reads the member's incarnation (member.Clients.Incarnation).
	incarnationOf func(context.Context) (Incarnation, error)

	since       time.Time   // start of the current healthy stretch; zero while unhealthy
	breaks      int         // healthy stretches that ended before stableFor
	incarnation Incarnation // the etcd process of the current stretch; zero when not known
	unsure      bool        // a look since the last good one could not reach the member
	// lastReachedOK says the last look that reached the member found it healthy (looks that did not reach
	// it, or its leader, say nothing either way).
	lastReachedOK bool
}

// look is one health look at a member. noLook says it never reached etcd (member.ErrNoLook).
type look struct {
	ok     bool
	seen   string
	noLook bool
	reason ProblemReason
}

func (s *stability) observe(ctx context.Context, l look) (bool, string, error) {
	if !l.ok {
		if l.noLook && !s.since.IsZero() && s.incarnation.Known() {
			s.unsure = true
			return false, l.seen + "; the healthy stretch holds until etcd answers again from the same process", nil
		}
		if !l.noLook {
			s.lastReachedOK = false
		}
		return false, s.broken(l.seen), nil
	}
	s.lastReachedOK = true
	if s.since.IsZero() {
		now := time.Now()
		inc, err := s.incarnationOf(ctx)
		if err != nil && !errors.Is(err, member.ErrNoIncarnation) {
			// Which process answered is not known, so a stretch started on it could span restarts unseen: a
			// crash loop whose health looks all land in its up moments (the schedule checker's seed 1142 of
			// 10,000, with requests late by up to 200 ms, passed a fast crash loop). The stretch starts on a look
			// whose process is named; an etcd that never names it is judged on its looks alone, as before.
			return false, "answers; reading which etcd process serves: " + err.Error(), nil
		}
		s.since, s.unsure, s.incarnation = now, false, inc
	} else if s.unsure || time.Since(s.since) >= s.stableFor {
		if seen := s.checkSameProcess(ctx); seen != "" {
			return false, seen, nil
		}
	}
	if held := time.Since(s.since); held < s.stableFor {
		seen := fmt.Sprintf("healthy for %s of the %s it must stay so", held.Round(100*time.Millisecond), s.stableFor)
		if s.breaks > 0 {
			// The gate may time out in a healthy moment of a flapping member: say it flapped all the same.
			seen = fmt.Sprintf("%s (it was healthy %d time(s) before, never for %s)", seen, s.breaks, s.stableFor)
		}
		return false, seen, nil
	}
	return true, "", nil
}

// verdict says whether the looks so far judge the member: it broke a healthy stretch (by its own answer or a
// new process), or the last look that reached it found it failing. A member that only ever failed before its
// first healthy look (starting up) and has answered healthy since, with looks that did not reach it or its
// leader in between, has not been judged: a gate that runs out of time on it is no verdict on the revision.
func (s *stability) verdict() bool { return s.breaks > 0 || !s.lastReachedOK }

// broken ends the current stretch on a failed look and says what was seen.
func (s *stability) broken(seen string) string {
	if !s.since.IsZero() {
		s.breaks++
		s.since, s.incarnation, s.unsure = time.Time{}, Incarnation{}, false
	}
	if s.breaks > 0 {
		seen = fmt.Sprintf("%s (it was healthy %d time(s) since it started, never for %s)", seen, s.breaks, s.stableFor)
	}
	return seen
}

// checkSameProcess checks that the stretch's etcd process still serves. It returns "" when it does (or when
// the stretch has no incarnation to check). Otherwise it says what it found: a new process (a break: the
// stretch starts again from it), or no answer to the check (the stretch waits for the next look).
func (s *stability) checkSameProcess(ctx context.Context) string {
	if !s.incarnation.Known() {
		s.unsure = false
		return ""
	}
	now, err := s.incarnationOf(ctx)
	switch {
	case err != nil:
		return fmt.Sprintf("answers; checking that the same etcd process serves: %v", err)
	case !now.Same(s.incarnation):
		was := s.incarnation
		s.breaks++
		s.since, s.incarnation, s.unsure = time.Now(), now, false
		return fmt.Sprintf("restarted during its healthy stretch (etcd process started at %s, was %s)%s", now, was, s.flapped())
	}
	s.unsure = false
	return ""
}

// flapped says, for a member that broke before, how often.
func (s *stability) flapped() string {
	if s.breaks == 0 {
		return ""
	}
	return fmt.Sprintf(" (it was healthy %d time(s) since it started, never for %s)", s.breaks, s.stableFor)
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

// remove forgets rev: a member that passed on it did not stay up.
func (p *provenRevisions) remove(rev string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	delete(p.revs, rev)
}
