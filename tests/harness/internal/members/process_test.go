package members

import (
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// During a serve delay the container runs but etcd does not: no pid, not serving; afterwards it is an
// ordinary process.
func TestServeDelayStartsTheProcessLater(t *testing.T) {
	dir := t.TempDir()
	p, err := startProcess("/bin/sleep", []string{"30"}, "uid", filepath.Join(dir, "log"), filepath.Join(dir, "pid"), 300*time.Millisecond)
	require.NoError(t, err)
	assert.Zero(t, p.pid())
	assert.False(t, p.serving())
	assert.False(t, p.exited())
	assert.NoFileExists(t, filepath.Join(dir, "pid"))
	require.Eventually(t, p.serving, 3*time.Second, 20*time.Millisecond)
	assert.FileExists(t, filepath.Join(dir, "pid"))
	assert.False(t, p.terminate(func() time.Duration { return 5 * time.Second }, false), "sleep stops on SIGTERM")
}

// A container stopped during its serve delay never starts etcd, and says so.
func TestStopDuringServeDelay(t *testing.T) {
	tests := []struct {
		name   string
		stop   func(p *process)
		reason string
	}{
		{"terminate", func(p *process) { p.terminate(func() time.Duration { return time.Second }, false) }, "stopped during its serve delay, before etcd started"},
		{"crash", func(p *process) { p.crash("crash-after 1s") }, "crash-after 1s: stopped during its serve delay, before etcd started"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			p, err := startProcess("/bin/sleep", []string{"30"}, "uid", filepath.Join(dir, "log"), filepath.Join(dir, "pid"), time.Hour)
			require.NoError(t, err)
			assert.Error(t, p.signal(syscall.SIGSTOP), "nothing to freeze yet")
			tt.stop(p)
			require.Eventually(t, p.exited, 2*time.Second, 10*time.Millisecond)
			assert.Equal(t, tt.reason, p.exitReason())
			assert.Zero(t, p.pid())
		})
	}
}

// A crash-after fault kills the running process and its exit names the fault.
func TestCrashNamesTheFault(t *testing.T) {
	dir := t.TempDir()
	p, err := startProcess("/bin/sleep", []string{"30"}, "uid", filepath.Join(dir, "log"), filepath.Join(dir, "pid"), 0)
	require.NoError(t, err)
	p.crash("crash-after 3s")
	require.Eventually(t, p.exited, 2*time.Second, 10*time.Millisecond)
	assert.Equal(t, "crash-after 3s: signal: killed", p.exitReason())
}
