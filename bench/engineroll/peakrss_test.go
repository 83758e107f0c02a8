package engineroll

import (
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestVmHWM(t *testing.T) {
	tests := []struct {
		name   string
		status string
		kb     int64
		ok     bool
	}{
		{"a status page", "Name:\tbench-engine\nVmPeak:\t 1300000 kB\nVmHWM:\t   75324 kB\nVmRSS:\t   70000 kB\n", 75324, true},
		{"no VmHWM line (not Linux's page)", "Name:\tbench-engine\n", 0, false},
		{"a line that is not a size", "VmHWM:\tmany kB\n", 0, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			kb, ok := vmHWM(strings.NewReader(tc.status))
			assert.Equal(t, tc.ok, ok)
			assert.Equal(t, tc.kb, kb)
		})
	}
}

// A process started by a big one reports its own peak, not the big one's: bench-engine is started by the
// bench, whose memory grows over a run.
func TestMaxRSSIsTheChildsOwn(t *testing.T) {
	if os.Getenv("ENGINEROLL_PRINT_MAXRSS") != "" {
		os.Stdout.WriteString(strconv.FormatInt(maxRSSKB(), 10))
		os.Exit(0)
	}
	ballast := make([]byte, 300<<20)
	for i := range ballast {
		ballast[i] = 1
	}
	cmd := exec.Command(os.Args[0], "-test.run=^TestMaxRSSIsTheChildsOwn$")
	cmd.Env = append(os.Environ(), "ENGINEROLL_PRINT_MAXRSS=1")
	out, err := cmd.Output()
	require.NoError(t, err)
	childKB, err := strconv.ParseInt(strings.TrimSpace(string(out)), 10, 64)
	require.NoError(t, err, "child said %q", out)
	assert.Less(t, childKB, int64(200<<10), "the child's peak RSS in KiB, with 300 MB touched in its parent")
	assert.NotZero(t, ballast[len(ballast)-1])
}
