package members

import (
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"strconv"
	"sync"
	"sync/atomic"
	"time"
)

// podNet is the part of a pod's network that kwok's port-forward reaches: one TCP proxy per forwarded
// port (client and peer), owned by the daemon, in front of the member's own ports. The kwok PortForward
// rule targets these proxies, never the member.
//
// Why it exists: kwok's port-forward (v0.8.0, pkg/utils/net.Tunnel) dials the target and copies both
// ways, but only returns when both directions have ended, and it never closes its upstream connection when
// the client closes the stream. On a plain-HTTP etcd that orphaned connection holds the graceful stop
// (http.Shutdown, then gRPC GracefulStop) open until SIGKILL at the end of the grace period, so every
// member ever reached through a port-forward looked like a hung shutdown. A real node behaves otherwise:
// the runtime ends a forwarded connection as soon as either side of it ends, and a pod's port-forward
// streams end with the pod. podNet does both: a proxied connection is closed whole when either direction
// ends, and endStreams closes every open one when the member's process is told to stop.
//
// Peer traffic between members does not pass here: etcd's --initial-cluster names the members' own peer
// ports. A podNet lives as long as its member name in this daemon run, so its ports survive a pod's
// re-creation; they are not persisted (the PortForward rule is applied again on every start).
type podNet struct {
	client, peer *forwarder
}

// openPodNet starts the proxies of a member's client and peer ports on ports taken from alloc.
func openPodNet(alloc *portAllocator, member portSet) (*podNet, error) {
	client, err := openForwarder(alloc, member.Client)
	if err != nil {
		return nil, fmt.Errorf("proxy of client port %d: %w", member.Client, err)
	}
	peer, err := openForwarder(alloc, member.Peer)
	if err != nil {
		client.close(alloc)
		return nil, fmt.Errorf("proxy of peer port %d: %w", member.Peer, err)
	}
	return &podNet{client: client, peer: peer}, nil
}

// endStreams closes every proxied connection: the pod is going, and so are its port-forward streams.
// New connections are still accepted, as a terminating pod still takes port-forwards until it is gone.
func (n *podNet) endStreams() {
	n.client.closeConns()
	n.peer.closeConns()
}

// close stops both proxies, closes their connections and gives their ports back to alloc.
func (n *podNet) close(alloc *portAllocator) {
	n.client.close(alloc)
	n.peer.close(alloc)
}

// forwarder proxies one local port to one target port and tracks its open connections.
type forwarder struct {
	ln     net.Listener
	port   int
	target string

	// refusing resets every new connection at once (memberapi.AnnotationClientsRefused); set per pod
	// start, since the proxy outlives the pod.
	refusing atomic.Bool

	mu    sync.Mutex
	conns map[net.Conn]struct{}
	wg    sync.WaitGroup
}

// refuse turns the refusal of connections on or off; turning it on also ends the open ones.
func (f *forwarder) refuse(on bool) {
	f.refusing.Store(on)
	if on {
		f.closeConns()
	}
}

func openForwarder(alloc *portAllocator, targetPort int) (*forwarder, error) {
	port, err := alloc.take()
	if err != nil {
		return nil, err
	}
	ln, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(port)))
	if err != nil {
		alloc.free(port)
		return nil, fmt.Errorf("listening on %d: %w", port, err)
	}
	f := &forwarder{ln: ln, port: port, target: net.JoinHostPort("127.0.0.1", strconv.Itoa(targetPort)),
		conns: map[net.Conn]struct{}{}}
	f.wg.Add(1)
	go f.serve()
	return f, nil
}

func (f *forwarder) serve() {
	defer f.wg.Done()
	for {
		down, err := f.ln.Accept()
		if err != nil {
			if !errors.Is(err, net.ErrClosed) {
				slog.Error("pod port proxy stopped accepting", "port", f.port, "err", err)
			}
			return
		}
		f.wg.Add(1)
		go func() {
			defer f.wg.Done()
			f.proxy(down)
		}()
	}
}

// proxy copies between down (kwok) and a new connection to the target until either direction ends, then
// closes both, so neither end is left holding a connection its peer has given up.
func (f *forwarder) proxy(down net.Conn) {
	if f.refusing.Load() {
		resetConn(down)
		return
	}
	f.track(down)
	defer f.untrack(down)
	up, err := net.DialTimeout("tcp", f.target, 5*time.Second)
	if err != nil {
		return // the member is not listening: the client sees the connection closed, as with a real pod
	}
	f.track(up)
	defer f.untrack(up)
	done := make(chan struct{}, 2)
	go func() { _, _ = io.Copy(up, down); done <- struct{}{} }()
	go func() { _, _ = io.Copy(down, up); done <- struct{}{} }()
	<-done
	_ = down.Close()
	_ = up.Close()
	<-done
}

// resetConn closes c with a TCP reset rather than an orderly close: the peer reads "connection reset by
// peer" at once, the nearest a listener that accepted can come to a refused connection.
func resetConn(c net.Conn) {
	if tc, ok := c.(*net.TCPConn); ok {
		_ = tc.SetLinger(0)
	}
	_ = c.Close()
}

func (f *forwarder) track(c net.Conn) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.conns[c] = struct{}{}
}

func (f *forwarder) untrack(c net.Conn) {
	_ = c.Close()
	f.mu.Lock()
	defer f.mu.Unlock()
	delete(f.conns, c)
}

// closeConns closes every open connection; each proxy goroutine then ends on its failed copy.
func (f *forwarder) closeConns() {
	f.mu.Lock()
	defer f.mu.Unlock()
	for c := range f.conns {
		_ = c.Close()
	}
}

func (f *forwarder) close(alloc *portAllocator) {
	_ = f.ln.Close()
	f.closeConns()
	f.wg.Wait()
	alloc.free(f.port)
}
