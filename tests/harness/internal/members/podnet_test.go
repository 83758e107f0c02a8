package members

import (
	"io"
	"net"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// The proxy ends the upstream connection when either side ends (downstream close), and endStreams ends
// every open one while new connections still get through: the two things a real node does that kwok's
// tunnel does not.
func TestPodNetEndsUpstreamConnections(t *testing.T) {
	for _, tc := range []struct {
		name string
		end  func(n *podNet, down net.Conn)
	}{
		{"client closes", func(_ *podNet, down net.Conn) { _ = down.Close() }},
		{"pod stops", func(n *podNet, _ net.Conn) { n.endStreams() }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			target, err := net.Listen("tcp", "127.0.0.1:0")
			require.NoError(t, err)
			defer target.Close()
			targetPort := target.Addr().(*net.TCPAddr).Port
			alloc := newPortAllocator(31000, 31999)
			n, err := openPodNet(alloc, portSet{Client: targetPort, Peer: targetPort})
			require.NoError(t, err)
			defer n.close(alloc)
			n.setListening(true, true)

			dial := func() (down, up net.Conn) {
				down, err := net.Dial("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(n.client.port)))
				require.NoError(t, err)
				up, err = target.Accept()
				require.NoError(t, err)
				_, err = down.Write([]byte("ping"))
				require.NoError(t, err)
				buf := make([]byte, 4)
				_, err = io.ReadFull(up, buf)
				require.NoError(t, err)
				require.Equal(t, "ping", string(buf))
				return down, up
			}
			down, up := dial()
			defer down.Close()
			tc.end(n, down)
			require.NoError(t, up.SetReadDeadline(time.Now().Add(5*time.Second)))
			_, err = up.Read(make([]byte, 1))
			require.ErrorIs(t, err, io.EOF, "the member's side of the connection is closed")

			again, _ := dial()
			require.NoError(t, again.Close())
		})
	}
}

// A refusing proxy closes its port (a dial is refused without reaching the member), ends the open
// connections when it starts refusing, and proxies again once told to stop (the next pod of the same name).
func TestPodNetRefusesClients(t *testing.T) {
	target, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer target.Close()
	targetPort := target.Addr().(*net.TCPAddr).Port
	alloc := newPortAllocator(32000, 32999)
	n, err := openPodNet(alloc, portSet{Client: targetPort, Peer: targetPort})
	require.NoError(t, err)
	defer n.close(alloc)
	n.setListening(true, true)
	addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(n.client.port))

	open, err := net.Dial("tcp", addr)
	require.NoError(t, err)
	defer open.Close()
	up, err := target.Accept()
	require.NoError(t, err)
	defer up.Close()

	n.client.refuse(true)
	require.NoError(t, up.SetReadDeadline(time.Now().Add(5*time.Second)))
	_, err = up.Read(make([]byte, 1))
	require.ErrorIs(t, err, io.EOF, "the open connection ended when the port started refusing")

	_, err = net.Dial("tcp", addr)
	require.ErrorIs(t, err, syscall.ECONNREFUSED, "a new connection is refused")

	n.client.refuse(false)
	again, err := net.Dial("tcp", addr)
	require.NoError(t, err)
	defer again.Close()
	_, err = again.Write([]byte("ping"))
	require.NoError(t, err)
	require.NoError(t, target.(*net.TCPListener).SetDeadline(time.Now().Add(5*time.Second)))
	reached, err := target.Accept()
	require.NoError(t, err, "proxied again once the refusal is off")
	_ = reached.Close()
}
