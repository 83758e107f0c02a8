package engineroll

import (
	"fmt"
	"os"
	"path/filepath"
	"runtime/pprof"
)

// startProfiles starts a CPU profile at <prefix>.cpu.pprof; the returned stop ends it and writes, from
// samples (sampleMemory's), the heap profile of the moment the heap in use was largest at <prefix>.heap.pprof
// and the goroutines of that moment at <prefix>.goroutine.pprof (each open port-forward connection is two of
// them). An empty prefix profiles nothing.
func startProfiles(prefix string) (stop func(samples memorySamples) error, err error) {
	if prefix == "" {
		return func(memorySamples) error { return nil }, nil
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
	return func(samples memorySamples) error {
		pprof.StopCPUProfile()
		if err := cpu.Close(); err != nil {
			return err
		}
		if err := os.WriteFile(prefix+".goroutine.pprof", samples.goroutines, 0o644); err != nil {
			return err
		}
		return os.WriteFile(prefix+".heap.pprof", samples.heap, 0o644)
	}, nil
}
