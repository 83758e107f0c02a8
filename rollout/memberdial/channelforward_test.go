package memberdial

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	gwebsocket "github.com/gorilla/websocket"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/httpstream"
	"k8s.io/client-go/rest"
)

// fakeKubelet serves the channel protocol as the kubelet does: the port on both channels first, then the pod's
// bytes on channel 0; a refusing pod gets its error on channel 1 and the websocket closed.
type fakeKubelet struct {
	podAddr  string
	refuse   atomic.Bool
	upgrades atomic.Int32
	// hang makes upgrades hang unanswered, as an API server that accepts and then does not answer.
	hang atomic.Bool
	// open is every websocket served, so a test can drop them as a broken path to the API server would.
	open sync.Map
	// ports is the ports query of every upgrade.
	mu    sync.Mutex
	ports []string
}

func (k *fakeKubelet) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	k.upgrades.Add(1)
	if k.hang.Load() {
		<-r.Context().Done() // accepted, never answered
		return
	}
	k.mu.Lock()
	k.ports = append(k.ports, r.URL.Query().Get("ports"))
	k.mu.Unlock()
	up := gwebsocket.Upgrader{Subprotocols: []string{channelProtocol}}
	ws, err := up.Upgrade(w, r, nil)
	if err != nil {
		return
	}
	defer ws.Close()
	k.open.Store(ws, true)
	defer k.open.Delete(ws)
	for _, ch := range []byte{dataChannel, errorChannel} {
		_ = ws.WriteMessage(gwebsocket.BinaryMessage, []byte{ch, 0x4f, 0x09}) // 2383, little-endian
	}
	pod, err := net.Dial("tcp", k.podAddr)
	if err != nil || k.refuse.Load() {
		_ = ws.WriteMessage(gwebsocket.BinaryMessage, append([]byte{errorChannel}, "dial tcp: connection refused"...))
		return
	}
	defer pod.Close()
	go func() {
		buf := make([]byte, 1024)
		for {
			n, err := pod.Read(buf[1:])
			if n > 0 {
				buf[0] = dataChannel
				_ = ws.WriteMessage(gwebsocket.BinaryMessage, buf[:1+n])
			}
			if err != nil {
				// The pod closed its end: the kubelet ends the stream with a close frame.
				_ = ws.WriteControl(gwebsocket.CloseMessage, gwebsocket.FormatCloseMessage(gwebsocket.CloseNormalClosure, ""), time.Now().Add(time.Second))
				_ = ws.Close()
				return
			}
		}
	}()
	for {
		_, msg, err := ws.ReadMessage()
		if err != nil {
			return
		}
		if len(msg) > 1 && msg[0] == dataChannel {
			_, _ = pod.Write(msg[1:])
		}
	}
}

// echoPod answers every line with the same line.
func echoPod(t *testing.T) string {
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	t.Cleanup(func() { _ = lis.Close() })
	go func() {
		for {
			conn, err := lis.Accept()
			if err != nil {
				return
			}
			go func() {
				defer conn.Close()
				_, _ = io.Copy(conn, conn)
			}()
		}
	}()
	return lis.Addr().String()
}

// openFakeChannelForward opens a forward to an echoPod through a fakeKubelet; stop stops it (once, also at
// the test's end).
func openFakeChannelForward(t *testing.T) (kubelet *fakeKubelet, f *forward, stop func()) {
	kubelet = &fakeKubelet{podAddr: echoPod(t)}
	srv := httptest.NewServer(kubelet)
	t.Cleanup(srv.Close)
	sub, err := url.Parse(srv.URL + "/api/v1/namespaces/db/pods/etcd-0/portforward")
	require.NoError(t, err)
	// The context ends once the forward is open, as openAs's does.
	ctx, cancel := context.WithCancel(context.Background())
	f, err = openChannelForward(ctx, channelDialer(&rest.Config{Host: srv.URL}, sub, 2383))
	cancel()
	require.NoError(t, err)
	var once sync.Once
	stop = func() { once.Do(func() { close(f.stop) }) }
	t.Cleanup(stop)
	return kubelet, f, stop
}

// connect opens a connection to f's local port, closed at the test's end.
func connect(t *testing.T, f *forward) net.Conn {
	t.Helper()
	conn, err := net.Dial("tcp", f.addr)
	require.NoError(t, err)
	t.Cleanup(func() { _ = conn.Close() })
	return conn
}

// echo sends line over conn and returns what came back.
func echo(t *testing.T, conn net.Conn, line string) string {
	require.NoError(t, conn.SetDeadline(time.Now().Add(stuck)))
	_, err := fmt.Fprintln(conn, line)
	require.NoError(t, err)
	got, err := bufio.NewReader(conn).ReadString('\n')
	require.NoError(t, err)
	return got
}

func TestChannelForwardCarriesEachConnectionOverItsOwnWebsocket(t *testing.T) {
	kubelet, f, _ := openFakeChannelForward(t)
	assert.Equal(t, int32(1), kubelet.upgrades.Load(), "upgrades to open the forward")

	first := connect(t, f)
	assert.Equal(t, "one\n", echo(t, first, "one"))
	assert.Equal(t, int32(1), kubelet.upgrades.Load(), "upgrades once the first connection took the forward's own websocket")

	second := connect(t, f)
	assert.Equal(t, "two\n", echo(t, second, "two"))
	assert.Equal(t, "one again\n", echo(t, first, "one again"))
	assert.Equal(t, int32(2), kubelet.upgrades.Load(), "upgrades for two connections")
	assert.Equal(t, []string{"2383", "2383"}, kubelet.ports)
	assert.True(t, f.alive(), "a forward whose connections work stays")
}

func TestChannelForwardEndsWhenThePodRefusesAConnection(t *testing.T) {
	kubelet, f, _ := openFakeChannelForward(t)
	first := connect(t, f)
	assert.Equal(t, "one\n", echo(t, first, "one"))

	kubelet.refuse.Store(true)
	connect(t, f) // the kubelet refuses this one
	assert.ErrorContains(t, waitEnded(t, f, "the kubelet reported an error"), "connection refused")
	assertClosed(t, first, "the forward's other connection is closed with it")
	_, err := net.DialTimeout("tcp", f.addr, time.Second)
	assert.Error(t, err, "the forward's local port is closed")
}

// dropAll cuts every websocket it serves without a close frame: the API server lost, or a proxy reset.
func (k *fakeKubelet) dropAll() {
	k.open.Range(func(ws, _ any) bool {
		_ = ws.(*gwebsocket.Conn).UnderlyingConn().Close()
		return true
	})
}

// A websocket lost under a connection that carried the member's bytes, over a path to the API server that no
// longer opens a new one, ends the forward, as a lost connection ends client-go's SPDY forwarder: a look on it
// did not reach the member (issue 31's audit 4).
func TestChannelForwardEndsWhenAWebsocketIsLostWithItsPath(t *testing.T) {
	defer func(d time.Duration) { dialTimeout = d }(dialTimeout)
	dialTimeout = 100 * time.Millisecond
	kubelet, f, _ := openFakeChannelForward(t)
	conn := connect(t, f)
	assert.Equal(t, "one\n", echo(t, conn, "one"))

	kubelet.hang.Store(true) // the path broke: a new websocket is not answered
	kubelet.dropAll()
	assert.ErrorContains(t, waitEnded(t, f, "its websocket was lost"), "and a new one cannot be opened")
	assertClosed(t, conn, "the connection is closed with it")
}

// A websocket that ends without a close frame while a new one opens is a stream the API server ended (the
// kube-apiserver ends one that way when the pod closed its end): the forward serves on.
func TestChannelForwardOutlivesAWebsocketLostOverAWorkingPath(t *testing.T) {
	kubelet, f, _ := openFakeChannelForward(t)
	conn := connect(t, f)
	assert.Equal(t, "one\n", echo(t, conn, "one"))

	kubelet.dropAll()
	assertClosed(t, conn, "the connection whose websocket was lost is closed")
	second := connect(t, f)
	assert.Equal(t, "two\n", echo(t, second, "two"))
	assert.True(t, f.alive())
}

// A websocket for a new connection that the API server accepts and never answers ends the forward at the dial's
// deadline, rather than holding the connection, and the look on it, neither served nor failed (issue 31's
// audit 4).
func TestChannelForwardDialsWithADeadline(t *testing.T) {
	defer func(d time.Duration) { dialTimeout = d }(dialTimeout)
	dialTimeout = 100 * time.Millisecond
	kubelet, f, _ := openFakeChannelForward(t)
	first := connect(t, f) // takes the websocket the forward opened with
	assert.Equal(t, "one\n", echo(t, first, "one"))

	kubelet.hang.Store(true)
	connect(t, f)
	assert.ErrorContains(t, waitEnded(t, f, "a dial was not answered"), "opening a forwarded connection")
}

// While a new connection waits for its websocket from an API server that accepted and does not answer, the
// forward says so (opening): a look on it has not reached the member (review 2, item 5). Once the dial gives
// up, the forward ends and nothing waits any more.
func TestChannelForwardSaysAConnectionWaitsForItsPath(t *testing.T) {
	defer func(d time.Duration) { dialTimeout = d }(dialTimeout)
	dialTimeout = 500 * time.Millisecond
	kubelet, f, _ := openFakeChannelForward(t)
	first := connect(t, f)
	assert.Equal(t, "one\n", echo(t, first, "one"))
	assert.Zero(t, f.opening.Load(), "nothing waits for a path")

	kubelet.hang.Store(true)
	connect(t, f)
	assert.Eventually(t, func() bool { return f.opening.Load() == 1 }, time.Second, 5*time.Millisecond, "the second connection waits for its websocket")
	require.Error(t, waitEnded(t, f, "the dial gave up"))
	assert.Zero(t, f.opening.Load())
}

// A connection the client closes ends its websocket cleanly, and the forward serves on.
func TestChannelForwardOutlivesAConnectionTheClientCloses(t *testing.T) {
	_, f, _ := openFakeChannelForward(t)
	conn := connect(t, f)
	assert.Equal(t, "one\n", echo(t, conn, "one"))
	require.NoError(t, conn.Close())

	second := connect(t, f)
	assert.Equal(t, "two\n", echo(t, second, "two"))
	assert.True(t, f.alive())
}

func TestChannelForwardStopClosesItsConnections(t *testing.T) {
	_, f, stop := openFakeChannelForward(t)
	conn := connect(t, f)
	assert.Equal(t, "one\n", echo(t, conn, "one"))

	stop()
	assert.NoError(t, waitEnded(t, f, "stopped"), "a stopped forward did not fail")
	assertClosed(t, conn, "an open connection is closed")
}

// waitEnded waits for f to end, after what, and returns its error.
func waitEnded(t *testing.T, f *forward, after string) error {
	t.Helper()
	select {
	case <-f.done:
	case <-time.After(stuck):
		t.Fatalf("the forward did not end when %s", after)
	}
	f.errMu.Lock()
	defer f.errMu.Unlock()
	return f.err
}

// assertClosed says conn was closed by the forward: a read fails rather than waits.
func assertClosed(t *testing.T, conn net.Conn, msg string) {
	t.Helper()
	require.NoError(t, conn.SetReadDeadline(time.Now().Add(stuck)))
	_, err := conn.Read(make([]byte, 1))
	assert.Error(t, err, msg)
}

func TestNeedsSPDYOnlyWhereTheProtocolIsNotServed(t *testing.T) {
	pods := schema.GroupResource{Resource: "pods"}
	upgrade := func(cause error) error { return &httpstream.UpgradeFailureError{Cause: cause} }
	tests := []struct {
		name string
		err  error
		want bool
	}{
		{"a kubelet or proxy that does not know the protocol", upgrade(apierrors.NewBadRequest("unsupported")), true},
		{"an upgrade refused without a status", upgrade(errors.New("bad handshake")), true},
		{"an HTTPS proxy gorilla cannot use", errors.New("proxy: unknown scheme: https"), true},
		{"credentials that may not forward", upgrade(apierrors.NewForbidden(pods, "etcd-0", errors.New("no"))), false},
		{"credentials the API server does not know", upgrade(apierrors.NewUnauthorized("who")), false},
		{"a pod that is gone", upgrade(apierrors.NewNotFound(pods, "etcd-0")), false},
		{"an API server we cannot reach", errors.New("dial tcp: connection refused"), false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			assert.Equal(t, tc.want, needsSPDY(tc.err))
		})
	}
}

func TestUpgradeCauseLetsApierrorsSeeTheStatus(t *testing.T) {
	refused := &httpstream.UpgradeFailureError{Cause: apierrors.NewForbidden(schema.GroupResource{Resource: "pods"}, "etcd-0", errors.New("no"))}
	assert.False(t, apierrors.IsForbidden(refused), "client-go's upgrade error hides the status")
	assert.True(t, apierrors.IsForbidden(upgradeCause(refused)))
	other := errors.New("dial tcp: connection refused")
	assert.Equal(t, other, upgradeCause(other))
}
