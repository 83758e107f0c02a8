package harness

import (
	"bufio"
	"context"
	"fmt"
	"strconv"
	"strings"

	"github.com/etcd-rollout/pulumi-etcd-rollout/tests/harness/memberapi"
)

// Crash kills the member of ordinal with SIGKILL. Its pod stays; the daemon restarts the member after a
// short back-off, as a kubelet restarts a crashed container.
func (e *Etcd) Crash(ctx context.Context, ordinal int) error {
	return e.c.Members.Signal(ctx, e.Namespace, e.PodName(ordinal), memberapi.SignalKill)
}

// Freeze stops the member of ordinal with SIGSTOP: alive, holding its ports, answering nothing.
func (e *Etcd) Freeze(ctx context.Context, ordinal int) error {
	return e.c.Members.Signal(ctx, e.Namespace, e.PodName(ordinal), memberapi.SignalStop)
}

// Thaw resumes a frozen member with SIGCONT.
func (e *Etcd) Thaw(ctx context.Context, ordinal int) error {
	return e.c.Members.Signal(ctx, e.Namespace, e.PodName(ordinal), memberapi.SignalCont)
}

// HangOnTerm makes the current process of ordinal ignore the SIGTERM of its pod's deletion, so it dies only
// by SIGKILL when the grace period ends: a hung shutdown, and a leader lost without a hand-over.
func (e *Etcd) HangOnTerm(ctx context.Context, ordinal int, enabled bool) error {
	return e.c.Members.SetHangOnTerm(ctx, e.Namespace, e.PodName(ordinal), enabled)
}

// Status is the member's raft status (term, leader, indexes, learner).
func (e *Etcd) Status(ctx context.Context, ordinal int) (memberapi.Status, error) {
	return e.c.Members.Status(ctx, e.Namespace, e.PodName(ordinal))
}

// Leader returns the ordinal of the member that is leader, as the first answering member sees it, and the
// raft term. It fails when no member answers or the leader is not one of this StatefulSet's members.
func (e *Etcd) Leader(ctx context.Context) (ordinal int, term uint64, err error) {
	ids := map[uint64]int{}
	var leader uint64
	var lastErr error
	for i := range e.Spec.Replicas {
		st, err := e.Status(ctx, i)
		if err != nil {
			lastErr = err
			continue
		}
		ids[st.MemberID] = i
		if st.Leader != 0 && leader == 0 {
			leader = st.Leader
		}
		term = max(term, st.RaftTerm)
	}
	o, ok := ids[leader]
	if !ok {
		return -1, term, fmt.Errorf("no leader among the members of %s/%s (last error: %v)", e.Namespace, e.Spec.Name, lastErr)
	}
	return o, term, nil
}

// RaftTerm is the highest raft term any reachable member reports.
func (e *Etcd) RaftTerm(ctx context.Context) (uint64, error) {
	_, term, err := e.Leader(ctx)
	if term == 0 {
		return 0, err
	}
	return term, nil
}

// Metrics is the member's Prometheus text exposition.
func (e *Etcd) Metrics(ctx context.Context, ordinal int) (string, error) {
	return e.c.Members.Metrics(ctx, e.Namespace, e.PodName(ordinal))
}

// LeaderChanges is etcd_server_leader_changes_seen_total of the member's current process (it restarts at
// zero with every new process).
func (e *Etcd) LeaderChanges(ctx context.Context, ordinal int) (float64, error) {
	text, err := e.Metrics(ctx, ordinal)
	if err != nil {
		return 0, err
	}
	return MetricValue(text, "etcd_server_leader_changes_seen_total")
}

// LogFile is the path of the member's log on this host (every incarnation appends to it).
func (e *Etcd) LogFile(ctx context.Context, ordinal int) (string, error) {
	m, err := e.Member(ctx, ordinal)
	return m.LogFile, err
}

// MetricValue finds an unlabelled sample of name in a Prometheus text exposition.
func MetricValue(text, name string) (float64, error) {
	sc := bufio.NewScanner(strings.NewReader(text))
	sc.Buffer(make([]byte, 0, 64*1024), 1024*1024)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) >= 2 && fields[0] == name {
			v, err := strconv.ParseFloat(fields[1], 64)
			if err != nil {
				return 0, fmt.Errorf("metric %s: %w", name, err)
			}
			return v, nil
		}
	}
	return 0, fmt.Errorf("metric %s not found", name)
}
