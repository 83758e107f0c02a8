package rollout

import (
	"context"
	"fmt"
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
		return false, fmt.Sprintf("healthy for %s of the %s it must stay so", held.Round(100*time.Millisecond), s.stableFor), nil
	}
	return true, "", nil
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
