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
// engines are closed by the end, so a profile then would show what was allocated, not what was held). An
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
		return os.WriteFile(prefix+".heap.pprof", peak(), 0o644)
	}, nil
}

// startPeakHeap samples the heap in use every second and keeps the heap profile of the largest; the returned
// function stops it and gives that profile.
func startPeakHeap() (stop func() []byte) {
	done, result := make(chan struct{}), make(chan []byte)
	go func() {
		var best []byte
		var most uint64
		tick := time.NewTicker(time.Second)
		defer tick.Stop()
		for {
			var ms runtime.MemStats
			runtime.ReadMemStats(&ms)
			if ms.HeapInuse > most || best == nil {
				var buf bytes.Buffer
				if err := pprof.Lookup("heap").WriteTo(&buf, 0); err == nil {
					most, best = ms.HeapInuse, buf.Bytes()
				}
			}
			select {
			case <-done:
				result <- best
				return
			case <-tick.C:
			}
		}
	}()
	return func() []byte { close(done); return <-result }
}
