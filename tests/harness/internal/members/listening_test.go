package members

import (
	"net"
	"os"
	"path/filepath"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The pod's ports follow the member's: closed (a dial is refused, as kwok's dial to a real pod would be)
// until the member listens, open while it does, closed again once it stops listening after being told to
// stop, and closed when the process exits.
func TestPodNetPortsFollowTheMember(t *testing.T) {
	for _, tc := range []struct {
		name string
		end  func(n *podNet, member net.Listener, exited chan struct{})
	}{
		{"member stops listening after the stop", func(n *podNet, member net.Listener, _ chan struct{}) {
			n.endStreams()
			require.NoError(t, member.Close())
		}},
		{"process exits", func(_ *podNet, _ net.Listener, exited chan struct{}) { close(exited) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			alloc := newPortAllocator(33000, 33999)
			member, err := net.Listen("tcp", "127.0.0.1:0")
			require.NoError(t, err)
			memberPort := member.Addr().(*net.TCPAddr).Port
			require.NoError(t, member.Close()) // the process has started; etcd does not listen yet
			n, err := openPodNet(alloc, portSet{Client: memberPort, Peer: memberPort})
			require.NoError(t, err)
			defer n.close(alloc)
			addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(n.client.port))
			exited := make(chan struct{})
			n.follow(exited)

			time.Sleep(10 * listenPollEvery)
			_, err = net.Dial("tcp", addr)
			require.ErrorIs(t, err, syscall.ECONNREFUSED, "the pod's port is closed while the member does not listen")

			member, err = net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(memberPort)))
			require.NoError(t, err)
			defer member.Close()
			require.Eventually(t, func() bool { return dialable(addr) }, 5*time.Second, listenPollEvery,
				"the pod's port opens once the member listens")

			tc.end(n, member, exited)
			require.Eventually(t, func() bool { return !dialable(addr) }, 5*time.Second, listenPollEvery,
				"the pod's port closes with the member's")
		})
	}
}

func dialable(addr string) bool {
	c, err := net.Dial("tcp", addr)
	if err == nil {
		_ = c.Close()
	}
	return err == nil
}

// Only sockets in state LISTEN count, by their local port, in both tables' formats; the read stops at the
// first socket in another state (the kernel lists listeners first), so a listener after it is not read.
func TestReadListening(t *testing.T) {
	dir := t.TempDir()
	tcp := filepath.Join(dir, "tcp")
	require.NoError(t, os.WriteFile(tcp, []byte(
		"  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode\n"+
			"   0: 0100007F:4E20 00000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0 1 1 0 100 0 0 10 0\n"+
			"   1: 0100007F:4E21 0100007F:8000 01 00000000:00000000 00:00000000 00000000     0        0 2 1 0 20 4 30 10 -1\n"+
			"   2: 0100007F:4E22 0100007F:8001 06 00000000:00000000 03:00000F2B 00000000     0        0 0 3 0\n"+
			"   3: 0100007F:4E24 00000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0 4 1 0 100 0 0 10 0\n"), 0o644))
	tcp6 := filepath.Join(dir, "tcp6")
	require.NoError(t, os.WriteFile(tcp6, []byte(
		"  sl  local_address                         remote_address                        st tx_queue rx_queue\n"+
			"   0: 00000000000000000000000001000000:4E23 00000000000000000000000000000000:0000 0A 00000000:00000000\n"), 0o644))

	ports := map[int]bool{}
	require.NoError(t, readListening(tcp, ports))
	require.NoError(t, readListening(tcp6, ports))
	assert.Equal(t, map[int]bool{0x4E20: true, 0x4E23: true}, ports)
}

// A follower of an exited process that is late (its process already replaced) leaves the ports of its
// successor alone.
func TestALateFollowerLeavesItsSuccessorsPortsOpen(t *testing.T) {
	alloc := newPortAllocator(34000, 34999)
	member, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer member.Close()
	memberPort := member.Addr().(*net.TCPAddr).Port
	n, err := openPodNet(alloc, portSet{Client: memberPort, Peer: memberPort})
	require.NoError(t, err)
	defer n.close(alloc)
	addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(n.client.port))

	exitedFirst := make(chan struct{})
	n.follow(exitedFirst)
	require.Eventually(t, func() bool { return dialable(addr) }, 5*time.Second, listenPollEvery)
	n.follow(make(chan struct{}))    // the next process of the same pod, before the first one's follower ended
	time.Sleep(10 * listenPollEvery) // the successor has seen its member listen
	close(exitedFirst)
	time.Sleep(20 * listenPollEvery)
	assert.True(t, dialable(addr), "the successor's port stayed open")
}
