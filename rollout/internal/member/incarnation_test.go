package member

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/etcd-rollout/pulumi-etcd-rollout/rollout/memberdial"
)

func TestIncarnationIsTheProcessStartOnMetrics(t *testing.T) {
	tests := []struct {
		name, page, want, wantErr string
	}{
		{name: "etcd's page", page: "# HELP process_start_time_seconds Start time of the process since unix epoch in seconds.\n" +
			"# TYPE process_start_time_seconds gauge\nprocess_start_time_seconds 1.79619184704e+09\nprocess_virtual_memory_bytes 1.2e+10\n",
			want: "2026-12-02T06:10:47.04Z"},
		{name: "a similar name is not it", page: "process_start_time_seconds_total 5\n", wantErr: "/metrics has no process_start_time_seconds"},
		{name: "no process collector", page: "etcd_server_has_leader 1\n", wantErr: "/metrics has no process_start_time_seconds"},
		{name: "not a number", page: "process_start_time_seconds soon\n", wantErr: `process_start_time_seconds "soon"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := scanIncarnation(strings.NewReader(tt.page))
			if tt.wantErr != "" {
				require.ErrorContains(t, err, tt.wantErr)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tt.want, got.String())
		})
	}
}

// Two reads name one process when their starts are equal, or a whole second apart to the tick: Linux
// re-derives the boot time a start is counted from on every read (bootTimeJitter).
func TestIncarnationsAreTheSameProcessDespiteTheBootTimeJitter(t *testing.T) {
	start := time.Date(2026, 12, 3, 0, 22, 56, 950_000_000, time.UTC)
	at := func(d time.Duration) Incarnation { return IncarnationStartedAt(start.Add(d)) }
	tests := []struct {
		name string
		a, b Incarnation
		same bool
	}{
		{"the same start", at(0), at(0), true},
		{"a second later (the fresh-clone CI's read)", at(0), at(time.Second), true},
		{"a second earlier", at(time.Second), at(0), true},
		{"a tick more than a second", at(0), at(time.Second + 10*time.Millisecond), false},
		{"a tick later", at(0), at(10 * time.Millisecond), false},
		{"two seconds later", at(0), at(2 * time.Second), false},
		{"a restart half a second later", at(0), at(500 * time.Millisecond), false},
		{"unknown is no process", Incarnation{}, Incarnation{}, false},
		{"unknown against a known one", at(0), Incarnation{}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			assert.Equal(t, tt.same, tt.a.Same(tt.b))
			assert.Equal(t, tt.same, tt.b.Same(tt.a), "symmetric")
		})
	}
}

// Incarnation reads the member's own /metrics page, and tells two processes apart by their start times.
func TestIncarnationAsksTheMember(t *testing.T) {
	start := "1.79619184704e+09"
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/metrics" {
			http.NotFound(w, r)
			return
		}
		// A page as long as etcd's, so the read goes past the metric to the end.
		fmt.Fprintf(w, "%s\nprocess_start_time_seconds %s\n%s", strings.Repeat("etcd_debugging_x 1\n", 4000), start, strings.Repeat("go_gc 1\n", 4000))
	}))
	defer srv.Close()
	m := NewClients(addrDialer{addr: strings.TrimPrefix(srv.URL, "http://")}, "ns", "etcd", 2379, nil)
	defer m.Close()
	first, err := m.Incarnation(context.Background(), "etcd-0")
	require.NoError(t, err)
	again, err := m.Incarnation(context.Background(), "etcd-0")
	require.NoError(t, err)
	assert.True(t, first.Same(again))
	start = "1.79619185012e+09"
	restarted, err := m.Incarnation(context.Background(), "etcd-0")
	require.NoError(t, err)
	assert.False(t, first.Same(restarted))
}

// A port-forward that cannot be opened is a look that did not reach etcd, unless Kubernetes answered about
// the member (its pod is gone) or the run (it may not forward).
func TestAForwardThatCannotBeOpenedSaysNothingOfTheMember(t *testing.T) {
	pods := schema.GroupResource{Resource: "pods"}
	tests := []struct {
		name       string
		err        error
		wantNoLook bool
	}{
		{"API server away", errors.New(`port-forward to db/etcd-2: dial tcp 127.0.0.1:6443: connect: connection refused`), true},
		{"forward not ready", errors.New("port-forward to db/etcd-2 port 2379: forward not ready after 30s"), true},
		{"pod gone", fmt.Errorf("port-forward to db/etcd-2: %w", apierrors.NewNotFound(pods, "etcd-2")), false},
		{"not allowed", fmt.Errorf("port-forward to db/etcd-2: %w", apierrors.NewForbidden(pods, "etcd-2", errors.New("no"))), false},
		{"not allowed, as the upgrade words it (typed by memberdial)", fmt.Errorf("port-forward to db/etcd-2 port 2379: %w",
			&memberdial.ForwardForbiddenError{Namespace: "db", Err: errors.New(`pods "etcd-2" is forbidden`)}), false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := noLookOpening(tt.err)
			assert.ErrorIs(t, err, tt.err)
			assert.Equal(t, tt.wantNoLook, CouldNotLook(err))
		})
	}
}

func TestActivePeersAreTheConnectedRemotesOnMetrics(t *testing.T) {
	tests := []struct {
		name string
		page string
		want map[uint64]bool
	}{
		{name: "two peers, one connected", page: "# HELP etcd_network_active_peers The current number of active peer connections.\n" +
			"# TYPE etcd_network_active_peers gauge\n" +
			`etcd_network_active_peers{Local="8e9e05c52164694d",Remote="91bc3c398fb3c146"} 1` + "\n" +
			`etcd_network_active_peers{Local="8e9e05c52164694d",Remote="fd422379fda50e48"} 0` + "\n" +
			`etcd_network_disconnected_peers_total{Local="8e9e05c52164694d",Remote="fd422379fda50e48"} 2` + "\n",
			want: map[uint64]bool{0x91bc3c398fb3c146: true}},
		{name: "a single member has no peers", page: "process_start_time_seconds 1.7e+09\n", want: map[uint64]bool{}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := scanActivePeers(strings.NewReader(tt.page))
			require.NoError(t, err)
			assert.Equal(t, tt.want, got)
		})
	}
}
