package engineroll

import (
	"runtime"
	"time"
)

// GoMemory is the Go runtime's memory at one moment, in KiB: the part of a process's RSS the Go runtime
// accounts for (getrusage's peak RSS also counts the binary's resident pages, which the runtime does not).
type GoMemory struct {
	// Mapped is what the runtime holds from the OS and has not returned (Sys - HeapReleased).
	Mapped     uint64 `json:"mappedKB"`
	HeapInuse  uint64 `json:"heapInuseKB"`
	HeapIdle   uint64 `json:"heapIdleKB"` // free heap spans not yet returned to the OS
	StackInuse uint64 `json:"stackInuseKB"`
	Goroutines int    `json:"goroutines"`
}

// sampleGoMemory reads the runtime's memory every 500 ms until the returned stop, which gives the sample
// with the most memory mapped.
func sampleGoMemory() (stop func() GoMemory) {
	done, result := make(chan struct{}), make(chan GoMemory)
	go func() {
		var peak GoMemory
		tick := time.NewTicker(500 * time.Millisecond)
		defer tick.Stop()
		for {
			var ms runtime.MemStats
			runtime.ReadMemStats(&ms)
			if m := (ms.Sys - ms.HeapReleased) >> 10; m > peak.Mapped {
				peak = GoMemory{Mapped: m, HeapInuse: ms.HeapInuse >> 10, HeapIdle: (ms.HeapIdle - ms.HeapReleased) >> 10,
					StackInuse: ms.StackInuse >> 10, Goroutines: runtime.NumGoroutine()}
			}
			select {
			case <-done:
				result <- peak
				return
			case <-tick.C:
			}
		}
	}()
	return func() GoMemory { close(done); return <-result }
}
