package health

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/etcd-rollout/pulumi-etcd-rollout/rollout/internal/process"
)

// processes is a member's incarnation as a test sets it; an empty one makes the read fail, as an etcd
// without /metrics would.
// processes is the member's etcd process as /metrics names it; refusing makes the read fail by the member's
// own answer (down between a health look and the read, as a crash loop is).
type processes struct {
	now      process.Incarnation
	refusing bool
}

func (p *processes) read(context.Context) (process.Incarnation, error) {
	if p.refusing {
		return process.Incarnation{}, errors.New("process start of etcd-2: connection refused")
	}
	if !p.now.Known() {
		return process.Incarnation{}, fmt.Errorf("/metrics has no process_start_time_seconds: %w", process.ErrUnnamed)
	}
	return p.now, nil
}

// p1 and p2 are two processes of a member, 10 s apart; p1Late is p1 as Linux reports it now and then.
var (
	p1, p2 = fakeProcess(0), fakeProcess(1)
	p1Late = process.StartedAt(p1.StartedAt().Add(time.Second))
)

var (
	healthy   = Look{OK: true}
	refused   = Look{Seen: "connection refused"}
	unreached = Look{Seen: "the look did not reach etcd: port-forward ended", NoLook: true}
)

// A stability window passes only after an unbroken healthy stretch by one etcd process. A look that never
// reached the member does not break it when etcd names its process (the same one answers afterwards); a
// restart breaks it even when no look failed.
func TestStabilityNeedsOneProcessHealthyForTheWholeWindow(t *testing.T) {
	const window = 40 * time.Millisecond
	type step struct {
		process process.Incarnation // the member's incarnation from this step on (zero keeps the last)
		// refusing makes the read of its process fail from this step on, until a step sets answering.
		refusing, answering bool
		look                Look
		wait                bool // sleep past the window before the Look
		pass                bool
		seen                string
	}
	tests := []struct {
		name  string
		start process.Incarnation // the incarnation when the stretch begins (zero: etcd does not say)
		steps []step
	}{
		{"an unbroken stretch passes", p1, []step{
			{look: healthy, seen: "healthy for 0s of the 40ms it must stay so"},
			{look: healthy, wait: true, pass: true},
		}},
		{"a refused look breaks it and is remembered", p1, []step{
			{look: healthy},
			{look: refused, seen: "connection refused (it was healthy 1 time(s) since it started, never for 40ms)"},
			{look: healthy, seen: "healthy for 0s of the 40ms it must stay so (it was healthy 1 time(s) before, never for 40ms)"},
			{look: healthy, wait: true, pass: true},
		}},
		{"a look that did not reach the member holds the stretch", p1, []step{
			{look: healthy},
			{look: unreached, seen: "the look did not reach etcd: port-forward ended; the healthy stretch holds until etcd answers again from the same process"},
			{look: healthy, wait: true, pass: true},
		}},
		{"the same look breaks it when the member answers from a new process", p1, []step{
			{look: healthy},
			{look: unreached},
			{process: p2, look: healthy, seen: "restarted during its healthy stretch (etcd process started at 2026-12-03T00:00:20.00Z, was 2026-12-03T00:00:10.00Z) (it was healthy 1 time(s) since it started, never for 40ms)"},
			{look: healthy, seen: "healthy for 0s of the 40ms it must stay so (it was healthy 1 time(s) before, never for 40ms)"},
			{look: healthy, wait: true, pass: true},
		}},
		{"a restart between two good looks breaks it when the window ends", p1, []step{
			{look: healthy},
			{process: p2, look: healthy, wait: true, seen: "restarted during its healthy stretch (etcd process started at 2026-12-03T00:00:20.00Z, was 2026-12-03T00:00:10.00Z) (it was healthy 1 time(s) since it started, never for 40ms)"},
			{look: healthy, wait: true, pass: true},
		}},
		{"a start read a second late is the same process", p1, []step{
			{look: healthy},
			{process: p1Late, look: healthy, wait: true, pass: true},
		}},
		{"a stretch does not start on a look whose process cannot be read", p1, []step{
			{refusing: true, look: healthy, seen: "answers; reading which etcd process serves: process start of etcd-2: connection refused"},
			{look: healthy, wait: true, seen: "answers; reading which etcd process serves: process start of etcd-2: connection refused"},
			{answering: true, look: healthy, seen: "healthy for 0s of the 40ms it must stay so"},
			{look: healthy, wait: true, pass: true},
		}},
		{"without a process name a look that did not reach the member breaks it", process.Incarnation{}, []step{
			{look: healthy},
			{look: unreached, seen: "the look did not reach etcd: port-forward ended (it was healthy 1 time(s) since it started, never for 40ms)"},
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := &processes{now: tt.start}
			s := &Stability{StableFor: window, IncarnationOf: p.read}
			for i, st := range tt.steps {
				if st.process.Known() {
					p.now = st.process
				}
				p.refusing = (p.refusing || st.refusing) && !st.answering
				if st.wait {
					time.Sleep(window + 10*time.Millisecond)
				}
				ok, seen, err := s.Observe(context.Background(), st.look)
				require.NoError(t, err)
				assert.Equal(t, st.pass, ok, "step %d", i)
				if st.seen != "" {
					assert.Equal(t, st.seen, seen, "step %d", i)
				}
			}
		})
	}
}

// fakeProcess is the incarnation of a member's process after n restarts: started 10 s after the last one.
func fakeProcess(n int) process.Incarnation {
	return process.StartedAt(time.Date(2026, 12, 3, 0, 0, 10*(n+1), 0, time.UTC))
}
