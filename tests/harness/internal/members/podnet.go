package members

import (
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"strconv"
	"sync"
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
// ends, and endStreams closes every open one when the member's process is told to stop. And a real node
// reports a connection to a port nobody listens on as a failed dial on the port-forward's error stream
// (client-go then ends the whole forward); podNet's ports are open only while the member's are (follow), so
// kwok's dial fails the same way.
//
// What is left of kwok's tunnel: when the member ends a connection, the client's side stays open until the
// client writes or closes (a real node ends it within a second).
//
// Peer traffic between members does not pass here: etcd's --initial-cluster names the members' own peer
// ports. A podNet lives as long as its member name in this daemon run, so its ports survive a pod's
// re-creation; they are not persisted (the PortForward rule is applied again on every start).
type podNet struct {
	client, peer *forwarder
	incarnation  listenFollow
	warnOnce     sync.Once
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
// New connections are still accepted while the member still listens, as a terminating pod still takes
// port-forwards until it is gone; follow closes the ports once it stops listening.
func (n *podNet) endStreams() {
	n.incarnation.stop()
	n.client.closeConns()
	n.peer.closeConns()
}

// close stops both proxies, closes their connections and gives their ports back to alloc.
func (n *podNet) close(alloc *portAllocator) {
	n.client.close(alloc)
	n.peer.close(alloc)
}

// forwarder proxies one local port to one target port and tracks its open connections. Its port accepts
// only while the member listens on the target and does not refuse clients: kwok dials the port for every
// forwarded connection, and a dial that fails is what a real node reports on the port-forward's error stream
// (client-go then ends the forward). An accepted connection that the proxy could only close would instead
// hang the client: kwok's tunnel ends a connection only once both directions have ended, and the client,
// having sent its greeting, waits for an answer that never comes (gRPC: "error reading server preface",
// until its 2 s connect deadline).
type forwarder struct {
	port       int
	target     string
	targetPort int

	mu        sync.Mutex
	ln        net.Listener // nil while the port is closed
	listening bool         // the member listens on the target port
	refusing  bool         // memberapi.AnnotationClientsRefused: set per pod start, since the proxy outlives the pod
	closed    bool         // the port went back to the allocator: a late follow must not reopen it
	conns     map[net.Conn]struct{}
	wg        sync.WaitGroup
}

// refuse turns the refusal of connections on or off; turning it on also ends the open ones.
func (f *forwarder) refuse(on bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.refusing = on
	if on {
		f.closeConnsLocked()
	}
	f.syncLocked()
}

// follow records whether the member listens on the target port, and opens or closes the proxy's port to
// match.
func (f *forwarder) follow(listening bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.listening = listening
	f.syncLocked()
}

// syncLocked opens the port when the member listens and does not refuse, and closes it otherwise. The port
// stays the forwarder's in the allocator either way (the allocator's range is below the ephemeral one), so
// reopening it cannot collide with an outgoing connection.
func (f *forwarder) syncLocked() {
	want := f.listening && !f.refusing && !f.closed
	switch {
	case want && f.ln == nil:
		ln, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(f.port)))
		if err != nil {
			slog.Error("pod port proxy cannot reopen its port", "port", f.port, "err", err)
			return
		}
		f.ln = ln
		f.wg.Add(1)
		go f.serve(ln)
	case !want && f.ln != nil:
		_ = f.ln.Close()
		f.ln = nil
	}
}

// openForwarder takes a port for a proxy of targetPort, closed until follow says the member listens.
func openForwarder(alloc *portAllocator, targetPort int) (*forwarder, error) {
	port, err := alloc.take()
	if err != nil {
		return nil, err
	}
	return &forwarder{port: port, target: net.JoinHostPort("127.0.0.1", strconv.Itoa(targetPort)), targetPort: targetPort,
		conns: map[net.Conn]struct{}{}}, nil
}

func (f *forwarder) serve(ln net.Listener) {
	defer f.wg.Done()
	for {
		down, err := ln.Accept()
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
	f.track(down)
	defer f.untrack(down)
	up, err := net.DialTimeout("tcp", f.target, 5*time.Second)
	if err != nil {
		return // the member stopped listening since the port was opened: the window follow has not closed yet
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
	f.closeConnsLocked()
}

func (f *forwarder) closeConnsLocked() {
	for c := range f.conns {
		_ = c.Close()
	}
}

func (f *forwarder) close(alloc *portAllocator) {
	f.mu.Lock()
	f.closed = true
	f.syncLocked()
	f.closeConnsLocked()
	f.mu.Unlock()
	f.wg.Wait()
	alloc.free(f.port)
}
