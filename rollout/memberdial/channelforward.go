package memberdial

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"time"

	gwebsocket "github.com/gorilla/websocket"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/util/httpstream"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/transport/websocket"
)

// channelProtocol is the kubelet's own websocket port-forward protocol: channel 0 carries a connection's
// data and channel 1 the kubelet's error, each opening with the port as two little-endian bytes. The API
// server passes it through to the kubelet untouched; only SPDY tunnelled in a websocket is translated.
const channelProtocol = "v4.channel.k8s.io"

const (
	dataChannel  = 0
	errorChannel = 1
	// portHeaderLen is the port number the kubelet writes first on each channel.
	portHeaderLen = 2
	// copyBufferSize is what each direction of a connection copies at a time; an etcd member's answers to
	// the engine are small, and a bigger read only means fewer websocket messages.
	copyBufferSize = 16 << 10
	// spareIdle is how long the websocket opened to check a new forward waits for the connection it was
	// opened for before it is closed.
	spareIdle = 10 * time.Second
)

// dialTimeout bounds opening a websocket for a new connection: longer than a healthy API server takes, well
// short of the engine's gates. A variable so a test need not wait it out.
var dialTimeout = 5 * time.Second

// channelForward serves one pod's port on a local listener and carries each connection accepted there over
// a websocket of its own, in channelProtocol. client-go's forwarder speaks SPDY (tunnelled in a websocket or
// not), and SPDY's header compressor costs 0.7 MB per forward whatever it carries: at ten clusters rolled at
// once that was 61 % of the engine's live heap (make bench, ten-clusters heap profile). A channelForward costs
// its listener and, per open connection, a websocket's buffers.
//
// Like client-go's forwarder it ends for good, closing every connection, when one connection fails (the
// kubelet reports an error, as when the member refuses the connection right after its restart, or no
// websocket can be opened): Ending's callers count on a failed forward telling them at once.
type channelForward struct {
	*forward
	listener net.Listener
	dial     func(ctx context.Context) (*gwebsocket.Conn, error)
	ctx      context.Context
	cancel   context.CancelFunc

	mu    sync.Mutex
	spare *gwebsocket.Conn
	conns map[io.Closer]struct{}
	ended bool
}

// channelDialer opens websockets in channelProtocol to the port of the pod at url (its portforward
// subresource), with cfg's credentials, TLS and proxy.
func channelDialer(cfg *rest.Config, subresource *url.URL, port int) func(ctx context.Context) (*gwebsocket.Conn, error) {
	target := *subresource
	query := target.Query()
	query.Set("ports", strconv.Itoa(port))
	target.RawQuery = query.Encode()
	return func(ctx context.Context) (*gwebsocket.Conn, error) {
		transport, holder, err := websocket.RoundTripperFor(cfg)
		if err != nil {
			return nil, err
		}
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, target.String(), nil)
		if err != nil {
			return nil, err
		}
		return websocket.Negotiate(transport, holder, req, channelProtocol)
	}
}

// openChannelForward opens a websocket to check that the pod's port can be forwarded (the credentials may,
// the pod runs), keeps it for the first connection, and starts serving on a local port.
func openChannelForward(ctx context.Context, dial func(ctx context.Context) (*gwebsocket.Conn, error)) (*forward, error) {
	spare, err := dial(ctx)
	if err != nil {
		return nil, err
	}
	listener, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		_ = spare.Close()
		return nil, fmt.Errorf("local port: %w", err)
	}
	serveCtx, cancel := context.WithCancel(context.Background())
	c := &channelForward{
		forward:  &forward{addr: listener.Addr().String(), stop: make(chan struct{}), done: make(chan struct{})},
		listener: listener, dial: dial, ctx: serveCtx, cancel: cancel,
		spare: spare, conns: map[io.Closer]struct{}{},
	}
	go c.accept()
	go func() {
		select {
		case <-c.stop:
			c.end(nil)
		case <-c.ctx.Done():
		}
	}()
	time.AfterFunc(spareIdle, func() { c.closeSpare() })
	return c.forward, nil
}

func (c *channelForward) accept() {
	for {
		local, err := c.listener.Accept()
		if err != nil {
			c.end(nil)
			return
		}
		if !c.track(local) {
			return
		}
		go c.serve(local)
	}
}

// serve carries one local connection over a websocket until either side closes it.
func (c *channelForward) serve(local net.Conn) {
	defer c.untrack(local)
	defer local.Close()
	ws := c.takeSpare()
	if ws == nil {
		// With a deadline: an API server that accepts and then does not answer would hold the connection, and
		// the look on it, neither served nor failed.
		var err error
		if ws, err = c.dialCounted(); err != nil {
			c.end(fmt.Errorf("opening a forwarded connection: %w", err))
			return
		}
	}
	if !c.track(ws) {
		_ = ws.Close()
		return
	}
	defer c.untrack(ws)
	fromPod := make(chan error, 1)
	go func() {
		fromPod <- copyFromPod(local, ws)
		_ = local.Close()
	}()
	copyToPod(ws, local)
	closeWebsocket(ws)
	err := <-fromPod
	var lost *lostWebsocketError
	if errors.As(err, &lost) {
		err = c.pathBroken(lost)
	}
	if err != nil {
		c.end(err)
	}
}

// pathBroken tells a websocket lost because the path to the API server broke from one the API server ended
// without a close frame because the pod closed its end, which it does too (the kube-apiserver in front of
// kwok's kubelet ends every such stream with 1006): a new websocket, dialed with a deadline, opens only over a
// working path. It returns the forward's error when it does not, nil when it does (the new websocket is kept for
// the next connection).
func (c *channelForward) pathBroken(lost *lostWebsocketError) error {
	ws, err := c.dialCounted()
	if err != nil {
		return fmt.Errorf("%w, and a new one cannot be opened: %w", lost, err)
	}
	c.mu.Lock()
	keep := c.spare == nil && !c.ended
	if keep {
		c.spare = ws
	}
	c.mu.Unlock()
	if !keep {
		closeWebsocket(ws)
	}
	return nil
}

// dialCounted opens a websocket within dialTimeout, counted in opening meanwhile (Opening): a look waiting on
// it has not reached the member.
func (c *channelForward) dialCounted() (*gwebsocket.Conn, error) {
	c.opening.Add(1)
	defer c.opening.Add(-1)
	dctx, cancel := context.WithTimeout(c.ctx, dialTimeout)
	defer cancel()
	return c.dial(dctx)
}

// copyToPod sends what the local connection writes as data-channel messages until it closes.
func copyToPod(ws *gwebsocket.Conn, local net.Conn) {
	buf := make([]byte, 1+copyBufferSize)
	buf[0] = dataChannel
	for {
		n, err := local.Read(buf[1:])
		if n > 0 {
			if werr := ws.WriteMessage(gwebsocket.BinaryMessage, buf[:1+n]); werr != nil {
				return
			}
		}
		if err != nil {
			return
		}
	}
}

// copyFromPod writes the data channel to the local connection until the websocket closes; it returns the
// kubelet's error, if it sent one, or a *lostWebsocketError when the websocket ended without a close frame after
// it carried the pod's bytes: the path to the API server may have broken (client-go's SPDY forwarder ends on a
// lost connection), and a look on a broken path is no answer of the member's (issue 31's audit 4: the forward
// lived on, and such a look was counted the member's own failure). serve tells the two apart (pathBroken).
func copyFromPod(local net.Conn, ws *gwebsocket.Conn) error {
	buf := make([]byte, copyBufferSize)
	headerLeft := [2]int64{portHeaderLen, portHeaderLen}
	var podErr strings.Builder
	carried := false
	for {
		_, msg, err := ws.NextReader()
		if err != nil {
			switch {
			case podErr.Len() > 0:
				return fmt.Errorf("the kubelet: %s", podErr.String())
			case carried && lostAbnormally(err):
				return &lostWebsocketError{cause: err}
			}
			return nil
		}
		var channel [1]byte
		if _, err := io.ReadFull(msg, channel[:]); err != nil {
			continue
		}
		ch := int(channel[0])
		if ch != dataChannel && ch != errorChannel {
			return fmt.Errorf("the kubelet wrote on channel %d, which port-forward does not have", ch)
		}
		skipped, _ := io.CopyN(io.Discard, msg, headerLeft[ch])
		headerLeft[ch] -= skipped
		if ch == errorChannel {
			_, _ = io.Copy(&podErr, io.LimitReader(msg, 4<<10))
			continue
		}
		n, err := io.CopyBuffer(writerOnly{local}, msg, buf)
		carried = carried || n > 0
		if err != nil {
			return nil
		}
	}
}

// lostWebsocketError is a websocket that ended without a close frame after it carried the pod's bytes.
type lostWebsocketError struct{ cause error }

func (e *lostWebsocketError) Error() string {
	return "the websocket to the API server was lost: " + e.cause.Error()
}

func (e *lostWebsocketError) Unwrap() error { return e.cause }

// lostAbnormally says a websocket read ended without either side closing it: no close frame (or one saying
// something went wrong) and not our own close of it.
func lostAbnormally(err error) bool {
	if errors.Is(err, net.ErrClosed) {
		return false // we closed it: the local connection ended
	}
	var closed *gwebsocket.CloseError
	if errors.As(err, &closed) {
		return closed.Code != gwebsocket.CloseNormalClosure && closed.Code != gwebsocket.CloseGoingAway
	}
	return true
}

// writerOnly hides the connection's ReadFrom, which would allocate a buffer for every message.
type writerOnly struct{ io.Writer }

// closeWebsocket tells the API server the connection is done, then closes it.
func closeWebsocket(ws *gwebsocket.Conn) {
	_ = ws.WriteControl(gwebsocket.CloseMessage, gwebsocket.FormatCloseMessage(gwebsocket.CloseNormalClosure, ""), time.Now().Add(time.Second))
	_ = ws.Close()
}

// track records an open connection or websocket, to be closed if the forward ends; false when it has.
func (c *channelForward) track(conn io.Closer) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.ended {
		_ = conn.Close()
		return false
	}
	c.conns[conn] = struct{}{}
	return true
}

func (c *channelForward) untrack(conn io.Closer) {
	c.mu.Lock()
	defer c.mu.Unlock()
	delete(c.conns, conn)
}

func (c *channelForward) takeSpare() *gwebsocket.Conn {
	c.mu.Lock()
	defer c.mu.Unlock()
	ws := c.spare
	c.spare = nil
	return ws
}

func (c *channelForward) closeSpare() {
	if ws := c.takeSpare(); ws != nil {
		closeWebsocket(ws)
	}
}

// end stops the forward once: no new connections, every open one closed, err (nil when it was stopped)
// kept as the forward's error.
func (c *channelForward) end(err error) {
	c.mu.Lock()
	if c.ended {
		c.mu.Unlock()
		return
	}
	c.ended = true
	conns := c.conns
	c.conns = nil
	c.mu.Unlock()

	c.cancel()
	_ = c.listener.Close()
	c.closeSpare()
	for conn := range conns {
		_ = conn.Close()
	}
	c.errMu.Lock()
	c.err = err
	c.errMu.Unlock()
	close(c.done)
}

// upgradeCause is the API server's own answer inside a refused upgrade (which client-go does not unwrap), so
// that apierrors' predicates see a forbidden or missing pod.
func upgradeCause(err error) error {
	var upgrade *httpstream.UpgradeFailureError
	var status *apierrors.StatusError
	if errors.As(err, &upgrade) && errors.As(upgrade.Cause, &status) {
		return fmt.Errorf("unable to upgrade the port-forward: %w", status)
	}
	return err
}

// needsSPDY says a websocket in channelProtocol was refused for want of support (an older kubelet or a proxy
// between us and the API server), not for a reason SPDY would meet as well: the credentials, or the pod.
func needsSPDY(err error) bool {
	if httpstream.IsHTTPSProxyError(err) {
		return true
	}
	var upgrade *httpstream.UpgradeFailureError
	if !errors.As(err, &upgrade) {
		return false
	}
	cause := upgrade.Cause
	return !apierrors.IsForbidden(cause) && !apierrors.IsUnauthorized(cause) && !apierrors.IsNotFound(cause)
}
