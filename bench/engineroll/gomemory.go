package engineroll

import (
	"bytes"
	"runtime"
	"runtime/pprof"
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

// sampleMemory reads the runtime's memory every 500 ms until the returned stop, which gives the sample with
// the most memory mapped. With profiles set, it also keeps the heap and goroutine profiles of the moment the
// heap in use was largest (the engines are closed by the end, so a profile then would show what was
// allocated, not what was held).
func sampleMemory(profiles bool) (stop func() memorySamples) {
	done, result := make(chan struct{}), make(chan memorySamples)
	go func() {
		var out memorySamples
		var mostInuse uint64
		tick := time.NewTicker(500 * time.Millisecond)
		defer tick.Stop()
		for {
			var ms runtime.MemStats
			runtime.ReadMemStats(&ms)
			if m := (ms.Sys - ms.HeapReleased) >> 10; m > out.peak.Mapped {
				out.peak = GoMemory{Mapped: m, HeapInuse: ms.HeapInuse >> 10, HeapIdle: (ms.HeapIdle - ms.HeapReleased) >> 10,
					StackInuse: ms.StackInuse >> 10, Goroutines: runtime.NumGoroutine()}
			}
			if profiles && (ms.HeapInuse > mostInuse || out.heap == nil) {
				var heap, goroutines bytes.Buffer
				if pprof.Lookup("heap").WriteTo(&heap, 0) == nil && pprof.Lookup("goroutine").WriteTo(&goroutines, 0) == nil {
					mostInuse, out.heap, out.goroutines = ms.HeapInuse, heap.Bytes(), goroutines.Bytes()
				}
			}
			select {
			case <-done:
				result <- out
				return
			case <-tick.C:
			}
		}
	}()
	return func() memorySamples { close(done); return <-result }
}

// memorySamples is what sampleMemory kept: the peak of the Go runtime's memory and, when asked, the profiles
// of the heap's largest moment.
type memorySamples struct {
	peak             GoMemory
	heap, goroutines []byte
}
