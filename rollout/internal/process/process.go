// Package process names one etcd process of a member by the start time it reports: a restart between two
// looks shows as another incarnation, whatever the looks saw.
package process

import (
	"errors"
	"time"
)

// Incarnation is one etcd process of a member, named by the start time it reports on /metrics (by the
// member's node clock). Two incarnations are compared only with each other (Same), never with our clock, so
// clock skew cannot fool the comparison. The zero Incarnation is "etcd did not say".
type Incarnation struct{ started time.Time }

// StartedAt is the incarnation of a process that reports started as its start time.
func StartedAt(started time.Time) Incarnation { return Incarnation{started: started.UTC()} }

// Known says etcd named its process.
func (i Incarnation) Known() bool { return !i.started.IsZero() }

// StartedAt is the process start the member reported.
func (i Incarnation) StartedAt() time.Time { return i.started }

// String is the start time, to the 10 ms the kernel counts a start in; "unknown" for the zero Incarnation.
func (i Incarnation) String() string {
	if !i.Known() {
		return "unknown"
	}
	return i.started.Format("2006-01-02T15:04:05.00Z")
}

// Name is String for a known incarnation, and "" otherwise (MemberTiming.Process).
func (i Incarnation) Name() string {
	if !i.Known() {
		return ""
	}
	return i.String()
}

// bootTimeJitter is how far one process's reported start moves between reads without a restart. Linux
// reports a start as the boot time, in whole seconds, plus the clock ticks since boot, and re-derives that
// boot time (wall clock less uptime) on every read, so it is off by a second now and then
// (prometheus/client_golang#289): the fresh-clone CI saw one etcd started at 00:22:56.95 and then 00:22:57.95.
const bootTimeJitter = time.Second

// Same says whether i and other name one etcd process: the same start, or starts a whole bootTimeJitter
// apart to the tick (the ticks since boot do not move; only the boot time does). A restart exactly a whole
// second after the last start is taken for the same process: only a member whose gate is one healthy look can
// restart that soon after it started, and a crash loop that fast shows in the kubelet's restart count.
func (i Incarnation) Same(other Incarnation) bool {
	if !i.Known() || !other.Known() {
		return false
	}
	const halfTick = 5 * time.Millisecond
	d := i.started.Sub(other.started).Abs()
	return d < halfTick || (d-bootTimeJitter).Abs() < halfTick
}

// ErrUnnamed is wrapped when etcd answered but does not name its process: a lasting property of that
// etcd, unlike a read that failed, which says nothing of which process serves.
var ErrUnnamed = errors.New("restarts between looks cannot be seen")
