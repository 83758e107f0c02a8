package member

import (
	"context"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// addrDialer hands out one fixed address for every member, as a forward to a single member would.
type addrDialer struct{ addr string }

func (d addrDialer) Endpoint(context.Context, string, string, int) (string, error) {
	return d.addr, nil
}
func (addrDialer) Release(string, string, int) {}
func (addrDialer) Close() error                { return nil }

// versionServer is a member's /version endpoint that records which connections its requests came on and
// which connections closed (the member client's gRPC connection to it is neither asked nor counted).
type versionServer struct {
	mu       sync.Mutex
	requests map[string]int
	closed   map[string]bool
}

func (v *versionServer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodGet || r.URL.Path != "/version" {
		http.NotFound(w, r) // the member client's gRPC connection, whose preface reads as a PRI request
		return
	}
	v.mu.Lock()
	v.requests[r.RemoteAddr]++
	v.mu.Unlock()
	_, _ = w.Write([]byte(`{"etcdserver":"3.6.8","etcdcluster":"3.6.0"}`))
}

func (v *versionServer) track(c net.Conn, s http.ConnState) {
	if s == http.StateClosed {
		v.mu.Lock()
		v.closed[c.RemoteAddr().String()] = true
		v.mu.Unlock()
	}
}

// requestConns returns the connections requests came on, and whether each of them is closed.
func (v *versionServer) requestConns() map[string]bool {
	v.mu.Lock()
	defer v.mu.Unlock()
	out := map[string]bool{}
	for addr := range v.requests {
		out[addr] = v.closed[addr]
	}
	return out
}

// Every observation asks the leader for the cluster version, so the request must not cost a connection
// of its own: a connection closed right after etcd closed its side drew a reset that ended the member's
// whole port-forward (see memberHTTP). The member's one connection is closed when the member is forgotten.
func TestClusterVersionKeepsOneConnectionPerMember(t *testing.T) {
	member := &versionServer{requests: map[string]int{}, closed: map[string]bool{}}
	srv := httptest.NewUnstartedServer(member)
	srv.Config.ConnState = member.track
	srv.Start()
	defer srv.Close()
	m := NewClients(addrDialer{strings.TrimPrefix(srv.URL, "http://")}, "db", "etcd-headless", 2379, nil)
	defer m.Close()

	for range 5 {
		v, err := m.ClusterVersion(context.Background(), "etcd-0")
		require.NoError(t, err)
		assert.Equal(t, "3.6.0", v)
	}
	conns := member.requestConns()
	require.Len(t, conns, 1, "connections that carried 5 requests")
	for addr, closed := range conns {
		assert.False(t, closed, "connection %s closed before the member was forgotten", addr)
	}

	m.Forget("etcd-0")
	assert.Eventually(t, func() bool {
		for _, closed := range member.requestConns() {
			return closed
		}
		return false
	}, 5*time.Second, 10*time.Millisecond, "Forget closes the member's connection")
}
