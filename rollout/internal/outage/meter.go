package outage

import (
	"context"
	"sync"
	"time"
)

// Read is one linearizable read through the member; nil means etcd answered it.
type Read func(ctx context.Context) error

// Measure is what a Meter saw.
type Measure struct {
	// LastBefore is the last successful read before the longest stretch without one; FirstAfter the first
	// after it (zero when none came: the member was not back when the meter stopped).
	LastBefore, FirstAfter time.Time
	// Outage is FirstAfter - LastBefore, or, when the member was not back, how long it had been gone when the
	// meter stopped: the outage so far.
	Outage time.Duration
	// Back says a read succeeded after the failed ones.
	Back bool
	// Reads and Failed count the reads sent (the one before the restart included) and those that failed.
	Reads, Failed int
	// Every is the interval between reads: the outage is known to within it (and a read's own time).
	Every time.Duration
}

// Meter measures one restart: Start reads once, before it; Down marks the restart; Watch reads in the
// background until Stop. It sends no read between Down and Watch: an open client connection can hold etcd's
// shutdown until the pod's grace period ends (the engine forgets the member's connections before its restart
// for that reason), which would lengthen the very outage measured.
type Meter struct {
	every   time.Duration
	timeout time.Duration
	now     func() time.Time
	read    Read

	mu       sync.Mutex
	last     time.Time // the last successful read
	failedAt time.Time // the first failed read since last; zero while reads succeed
	worst    Measure   // the longest stretch between two successful reads that had a failed one inside

	watching bool
	cancel   context.CancelFunc
	done     chan struct{}
}

// Start reads once, at once: the read must succeed, since an outage is measured from a member that answered.
// Each read is given at most timeout; Watch reads every interval.
func Start(ctx context.Context, read Read, every, timeout time.Duration) (*Meter, error) {
	m := &Meter{every: every, timeout: timeout, now: time.Now, read: read, done: make(chan struct{}), cancel: func() {}}
	if err := m.readOnce(ctx, read); err != nil {
		return nil, err
	}
	return m, nil
}

// Down marks the restart: from now until a read succeeds, writes are counted as stopped.
func (m *Meter) Down() {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.failedAt.IsZero() {
		m.failedAt = m.now()
	}
}

// Watch reads every interval in the background until Stop: the first success ends the outage.
func (m *Meter) Watch(ctx context.Context) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.watching {
		return
	}
	m.watching = true
	ctx, m.cancel = context.WithCancel(ctx)
	go m.loop(ctx, m.read)
}

func (m *Meter) loop(ctx context.Context, read Read) {
	defer close(m.done)
	t := time.NewTicker(m.every)
	defer t.Stop()
	_ = m.readOnce(ctx, read)
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			_ = m.readOnce(ctx, read)
		}
	}
}

// readOnce sends one read and records its outcome; a read cut short by Stop records nothing.
func (m *Meter) readOnce(ctx context.Context, read Read) error {
	rctx, cancel := context.WithTimeout(ctx, m.timeout)
	err := read(rctx)
	cancel()
	if ctx.Err() != nil {
		return ctx.Err()
	}
	m.record(m.now(), err == nil)
	return err
}

// record adds one read's outcome at t.
func (m *Meter) record(t time.Time, ok bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.worst.Reads++
	switch {
	case !ok:
		m.worst.Failed++
		if m.failedAt.IsZero() {
			m.failedAt = t
		}
	case !m.failedAt.IsZero() && !m.last.IsZero():
		if gap := t.Sub(m.last); gap > m.worst.Outage || !m.worst.Back {
			m.worst.LastBefore, m.worst.FirstAfter, m.worst.Outage, m.worst.Back = m.last, t, gap, true
		}
		fallthrough
	default:
		m.last, m.failedAt = t, time.Time{}
	}
}

// Back reads once more, at once, unless a read since Down has succeeded: the caller knows the member is back
// (it passed its gates) sooner than the next tick would.
func (m *Meter) Back(ctx context.Context) {
	m.mu.Lock()
	open := !m.failedAt.IsZero()
	m.mu.Unlock()
	if open {
		_ = m.readOnce(ctx, m.read)
	}
}

// Stop ends the reads and says what they saw. A member still failing when it stops reports the outage so far
// (Back false) when that is longer than any stretch it came back from.
func (m *Meter) Stop() Measure {
	m.mu.Lock()
	watching, cancel := m.watching, m.cancel
	m.mu.Unlock()
	cancel()
	if watching {
		<-m.done
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	out := m.worst
	out.Every = m.every
	if !m.failedAt.IsZero() {
		if gone := m.now().Sub(m.last); !out.Back || gone > out.Outage {
			out.LastBefore, out.FirstAfter, out.Outage, out.Back = m.last, time.Time{}, gone, false
		}
	}
	return out
}
