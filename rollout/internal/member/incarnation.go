package member

import (
	"bufio"
	"fmt"
	"io"
	"math"
	"strconv"
	"strings"
	"time"

	"github.com/etcd-rollout/pulumi-etcd-rollout/rollout/internal/process"
)

// incarnationMetric is the start time of the etcd process, in Unix seconds, from the process collector that
// every etcd registers on /metrics (3.4 to 3.6): it changes exactly when the member restarts.
const incarnationMetric = "process_start_time_seconds"

// Incarnation is one etcd process of a member (internal/process, so that what judges a member's health reads
// it without etcd's client).
type Incarnation = process.Incarnation

// IncarnationStartedAt is the incarnation of a process that reports started as its start time.
func IncarnationStartedAt(started time.Time) Incarnation { return process.StartedAt(started) }

// scanIncarnation finds incarnationMetric's value in a Prometheus text page.
func scanIncarnation(page io.Reader) (Incarnation, error) {
	sc := bufio.NewScanner(page)
	sc.Buffer(make([]byte, 0, 4096), 1<<20) // its lines are short; the 1 MB cap only bounds a malformed page
	for sc.Scan() {
		if value, ok := strings.CutPrefix(sc.Text(), incarnationMetric+" "); ok {
			sec, err := strconv.ParseFloat(strings.TrimSpace(value), 64)
			if err != nil {
				return Incarnation{}, fmt.Errorf("%s %q: %w", incarnationMetric, value, err)
			}
			return IncarnationStartedAt(time.Unix(0, int64(math.Round(sec*1e3))*int64(time.Millisecond))), nil
		}
	}
	if err := sc.Err(); err != nil {
		return Incarnation{}, err
	}
	return Incarnation{}, fmt.Errorf("/metrics has no %s (an etcd without the process collector): %w", incarnationMetric, ErrNoIncarnation)
}

// ErrNoIncarnation is wrapped when etcd answered but does not name its process (process.ErrUnnamed).
var ErrNoIncarnation = process.ErrUnnamed

// activePeersMetric is the rafthttp gauge each etcd keeps per peer (labels Local and Remote, member IDs in
// hex): 1 while its Raft streams to that peer are connected, 0 once a message to it failed.
const activePeersMetric = "etcd_network_active_peers"
