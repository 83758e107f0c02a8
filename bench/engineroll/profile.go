package engineroll

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"runtime/pprof"
	"time"
)

// startProfiles starts a CPU profile at <prefix>.cpu.pprof; the returned stop ends it and writes at
// <prefix>.heap.pprof the heap profile taken when the heap in use was largest (sampled every second: the
// engines are closed by the end, so a profile then would show what was allocated, not what was held), and at
// <prefix>.goroutine.pprof the goroutines of that moment (each open port-forward connection is two of them). An
// empty prefix profiles nothing.
func startProfiles(prefix string) (stop func() error, err error) {
	if prefix == "" {
		return func() error { return nil }, nil
	}
	if err := os.MkdirAll(filepath.Dir(prefix), 0o755); err != nil {
		return nil, err
	}
	cpu, err := os.Create(prefix + ".cpu.pprof")
	if err != nil {
		return nil, err
	}
	if err := pprof.StartCPUProfile(cpu); err != nil {
		cpu.Close()
		return nil, fmt.Errorf("starting the CPU profile: %w", err)
	}
	peak := startPeakHeap()
	return func() error {
		pprof.StopCPUProfile()
		if err := cpu.Close(); err != nil {
			return err
		}
		heap, goroutines := peak()
		if err := os.WriteFile(prefix+".goroutine.pprof", goroutines, 0o644); err != nil {
			return err
		}
		return os.WriteFile(prefix+".heap.pprof", heap, 0o644)
	}, nil
}

// startPeakHeap samples the heap in use every second and keeps the heap and goroutine profiles of the moment
// it was largest; the returned function stops it and gives those profiles.
func startPeakHeap() (stop func() (heap, goroutines []byte)) {
	done, result := make(chan struct{}), make(chan [2][]byte)
	go func() {
		var best, bestGoroutines []byte
		var most uint64
		tick := time.NewTicker(time.Second)
		defer tick.Stop()
		for {
			var ms runtime.MemStats
			runtime.ReadMemStats(&ms)
			if ms.HeapInuse > most || best == nil {
				var heap, goroutines bytes.Buffer
				if pprof.Lookup("heap").WriteTo(&heap, 0) == nil && pprof.Lookup("goroutine").WriteTo(&goroutines, 0) == nil {
					most, best, bestGoroutines = ms.HeapInuse, heap.Bytes(), goroutines.Bytes()
				}
			}
			select {
			case <-done:
				result <- [2][]byte{best, bestGoroutines}
				return
			case <-tick.C:
			}
		}
	}()
	return func() ([]byte, []byte) { close(done); r := <-result; return r[0], r[1] }
}
