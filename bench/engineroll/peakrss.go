package engineroll

import (
	"bufio"
	"io"
	"os"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// maxRSSKB is this process's peak resident set, in KiB: the kernel's VmHWM, the high-water mark of the
// process's own memory. getrusage's ru_maxrss is not that: Linux carries into it, across exec, the
// high-water mark of the memory the process was started from, so bench-engine reported the bench's own peak
// (55 MB for the first one-cluster scenario, 118 MB for the last, growing with the bench, with 15 MB of Go
// memory in bench-engine). ru_maxrss is the answer only where /proc is not.
func maxRSSKB() int64 {
	if f, err := os.Open("/proc/self/status"); err == nil {
		defer f.Close()
		if kb, ok := vmHWM(f); ok {
			return kb
		}
	}
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return ru.Maxrss
}

// vmHWM reads the VmHWM line of a /proc/<pid>/status page ("VmHWM:    75324 kB").
func vmHWM(status io.Reader) (kb int64, ok bool) {
	return statusKB(status, "VmHWM:")
}

// statusKB reads one "<field>   <n> kB" line of a /proc/<pid>/status page.
func statusKB(status io.Reader, field string) (kb int64, ok bool) {
	lines := bufio.NewScanner(status)
	for lines.Scan() {
		fields := strings.Fields(lines.Text())
		if len(fields) == 3 && fields[0] == field && fields[2] == "kB" {
			n, err := strconv.ParseInt(fields[1], 10, 64)
			return n, err == nil
		}
	}
	return 0, false
}

// rssKB is this process's resident set now, split as the kernel splits it: anonymous memory (the heap,
// stacks) and file-backed pages (the binary, files it maps). 0 where /proc is not.
func rssKB() (anon, file int64) {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return 0, 0
	}
	anon, _ = statusKB(strings.NewReader(string(b)), "RssAnon:")
	file, _ = statusKB(strings.NewReader(string(b)), "RssFile:")
	return anon, file
}

// PeakRSS is the largest anonymous and file-backed parts of a process's resident set, sampled every 50 ms:
// what the process holds (heap, stacks: what it needs), and what it maps of files (the binary's pages, most
// touched once by package initialisation, which the kernel can drop and which processes of one binary share;
// Kubernetes' working set leaves inactive file pages out). Their sum may exceed VmHWM: the two peaks need not
// come at one moment.
type PeakRSS struct {
	AnonKB int64 `json:"peakRSSAnonKB"`
	FileKB int64 `json:"peakRSSFileKB"`
}

// sample keeps the peaks until stop.
func (p *PeakRSS) sample() (stop func()) {
	done, finished := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(finished)
		tick := time.NewTicker(50 * time.Millisecond)
		defer tick.Stop()
		for {
			anon, file := rssKB()
			p.AnonKB, p.FileKB = max(p.AnonKB, anon), max(p.FileKB, file)
			select {
			case <-done:
				return
			case <-tick.C:
			}
		}
	}()
	return func() { close(done); <-finished }
}
