package snapshot

import "time"

// Progress is one report of a transfer: Done bytes of about Expected (etcd's database size when it was read).
type Progress struct {
	Done, Expected int64
	Elapsed        time.Duration
}

// progressWriter counts what passes through it and reports at most once per interval, so a long transfer shows
// it is moving without flooding the log.
type progressWriter struct {
	expected int64
	report   func(Progress)
	interval time.Duration
	start    time.Time
	last     time.Time
	done     int64
}

func (p *progressWriter) Write(b []byte) (int, error) {
	p.done += int64(len(b))
	if p.report != nil && time.Since(p.last) >= p.interval {
		p.last = time.Now()
		p.report(Progress{Done: p.done, Expected: p.expected, Elapsed: time.Since(p.start)})
	}
	return len(b), nil
}
