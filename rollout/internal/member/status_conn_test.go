package member

import (
	"context"
	"net"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.etcd.io/etcd/api/v3/etcdserverpb"
	"google.golang.org/grpc"
)

// statusServer answers Status as a member with id 7 led by member 9.
type statusServer struct {
	etcdserverpb.UnimplementedMaintenanceServer
}

func (*statusServer) Status(context.Context, *etcdserverpb.StatusRequest) (*etcdserverpb.StatusResponse, error) {
	return &etcdserverpb.StatusResponse{Header: &etcdserverpb.ResponseHeader{MemberId: 7}, Leader: 9, RaftTerm: 3}, nil
}

// countingListener counts the connections it accepts.
type countingListener struct {
	net.Listener
	accepted atomic.Int32
}

func (l *countingListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err == nil {
		l.accepted.Add(1)
	}
	return c, err
}

// fixedDialer hands out one address for every member.
type fixedDialer struct{ addr string }

func (d fixedDialer) Endpoint(context.Context, string, string, int) (string, error) {
	return d.addr, nil
}
func (fixedDialer) Release(string, string, int) {}
func (fixedDialer) Close() error                { return nil }

// A member client holds one connection (etcdServiceConfig). Every look asks Status, five times a second per member while a gate polls. Each must travel over the member
// client's one connection: through a port-forward a new connection is a new stream through the API server and
// the kubelet (and a TLS handshake with an mTLS member), which clientv3's own Status opens per call.
func TestStatusReusesTheMemberConnection(t *testing.T) {
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	counting := &countingListener{Listener: lis}
	srv := grpc.NewServer()
	etcdserverpb.RegisterMaintenanceServer(srv, &statusServer{})
	go func() { _ = srv.Serve(counting) }()
	t.Cleanup(srv.Stop)

	m := NewClients(fixedDialer{addr: lis.Addr().String()}, "db", "etcd-headless", 2379, nil)
	t.Cleanup(func() { _ = m.Close() })
	var afterFirst int32
	for i := range 5 {
		st, err := m.Status(context.Background(), "etcd-0")
		require.NoError(t, err)
		assert.Equal(t, Status{ID: 7, Leader: 9, RaftTerm: 3}, st)
		if i == 0 {
			afterFirst = counting.accepted.Load()
		}
	}
	assert.Equal(t, int32(1), afterFirst, "connections the member accepted for the client and its first Status call")
	assert.Equal(t, afterFirst, counting.accepted.Load(), "connections the member accepted for four more Status calls")
}
