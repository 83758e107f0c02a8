package memberdial

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"sync"
	"sync/atomic"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/httpstream"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/portforward"
	"k8s.io/client-go/transport/spdy"
)

// PortForward opens port-forwards through the API server, one per pod and port: the kubelet's websocket
// channel protocol (channelForward), or client-go's SPDY forwarder where that is not served.
type PortForward struct {
	cfg  *rest.Config
	kube kubernetes.Interface
	// openForward opens one forward; it is PortForward.open, and a stand-in in unit tests.
	openForward func(ctx context.Context, namespace, pod string, port int) (*forward, error)

	mu       sync.Mutex
	forwards map[string]*forward
	// opening holds the forwards being opened, by key. Opening one can take up to 30 s (a slow kubelet, a
	// pod being scheduled), so it happens without holding mu: callers for other pods go on meanwhile, and a
	// caller for the same pod waits for that forward rather than open a second one.
	opening map[string]*opening
	closed  bool
	// now is the clock that ages a forward's pod check; time.Now except in tests.
	now func() time.Time
	// lookup, when set, tells a pod's UID without a GET (WithPodLookup).
	lookup PodLookup
	// spdyOnly is set once the API server refused the channel protocol where it upgraded SPDY.
	spdyOnly atomic.Bool
}

// PodLookup tells a pod as the caller already knows it (an informer's cache); found is false when it cannot
// say, and the dialer reads the pod with a GET instead.
type PodLookup func(namespace, name string) (pod *corev1.Pod, found bool)

// Option configures a PortForward.
type Option func(*PortForward)

// WithPodLookup makes the dialer learn each pod's UID from lookup before it falls back to a GET: a caller
// that watches the pods anyway spares the API server a read per forward check.
func WithPodLookup(lookup PodLookup) Option {
	return func(p *PortForward) { p.lookup = lookup }
}

// podRecheck is how long a forward is handed out again without reading its pod to confirm the UID. Every etcd
// call asks for the endpoint (five or so per gate poll), and a pod GET for each was most of the engine's load
// on the API server. The engine releases a member's forward itself before it restarts that member; a pod
// recreated by someone else is noticed within this long, and meanwhile its calls fail like a member that is
// away for a moment.
const podRecheck = 2 * time.Second

// opening is one forward being opened; f or err is set when done is closed.
type opening struct {
	done   chan struct{}
	cancel context.CancelFunc
	f      *forward
	err    error
}

var errClosed = errors.New("port-forward dialer is closed")

// forward is one open port-forward; done is closed when its stream ends.
type forward struct {
	uid types.UID
	// checked is when the pod was last read and still had uid.
	checked time.Time
	addr    string
	stop    chan struct{}
	done    chan struct{}
	errMu   sync.Mutex
	err     error
	// opening counts the connections waiting for their path to the pod (channelForward's websocket dials);
	// SPDY's forwarder multiplexes every connection over one stream and keeps it zero.
	opening atomic.Int32
}

func (f *forward) alive() bool {
	select {
	case <-f.done:
		return false
	default:
		return true
	}
}

// NewPortForward returns a Dialer that forwards through the API server described by cfg.
func NewPortForward(cfg *rest.Config, opts ...Option) (*PortForward, error) {
	kube, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("port-forward client: %w", err)
	}
	p := newPortForward(kube, nil)
	p.cfg = cfg
	p.openForward = p.open
	for _, o := range opts {
		o(p)
	}
	return p, nil
}

func newPortForward(kube kubernetes.Interface, open func(ctx context.Context, namespace, pod string, port int) (*forward, error)) *PortForward {
	return &PortForward{kube: kube, openForward: open, forwards: map[string]*forward{}, opening: map[string]*opening{}, now: time.Now}
}

// Endpoint implements Dialer. It looks the pod up first: a new UID means the pod was recreated and the old
// stream, which a real kubelet ties to the old pod, is replaced.
func (p *PortForward) Endpoint(ctx context.Context, namespace, pod string, port int) (string, error) {
	key := fmt.Sprintf("%s/%s:%d", namespace, pod, port)
	if addr, ok := p.recentlyChecked(key); ok {
		return addr, nil
	}
	got, err := p.readPod(ctx, namespace, pod)
	if err != nil {
		return "", fmt.Errorf("port-forward to %s/%s: %w", namespace, pod, err)
	}
	failed := func(err error) (string, error) {
		return "", fmt.Errorf("port-forward to %s/%s port %d: %w", namespace, pod, port, explainForbidden(err, namespace))
	}

	for {
		p.mu.Lock()
		if p.closed {
			p.mu.Unlock()
			return "", errClosed
		}
		if f, ok := p.forwards[key]; ok {
			if f.alive() && f.uid == got.UID {
				f.checked = p.now()
				p.mu.Unlock()
				return f.addr, nil
			}
			close(f.stop)
			delete(p.forwards, key)
		}
		if o, ok := p.opening[key]; ok {
			p.mu.Unlock()
			select {
			case <-o.done:
			case <-ctx.Done():
				return failed(ctx.Err())
			}
			if o.err == nil {
				return o.f.addr, nil
			}
			// The caller that was opening it gave up (its context ended) or the dialer closed: look again,
			// and open the forward ourselves if it is still wanted.
			if ctx.Err() == nil && (errors.Is(o.err, context.Canceled) || errors.Is(o.err, context.DeadlineExceeded)) {
				continue
			}
			return failed(o.err)
		}
		addr, err := p.openAs(ctx, key, namespace, pod, port, got.UID)
		if err != nil && !errors.Is(err, errClosed) {
			return failed(err)
		}
		return addr, err
	}
}

// readPod asks the lookup first, then the API server.
func (p *PortForward) readPod(ctx context.Context, namespace, pod string) (*corev1.Pod, error) {
	if p.lookup != nil {
		if got, ok := p.lookup(namespace, pod); ok {
			return got, nil
		}
	}
	return p.kube.CoreV1().Pods(namespace).Get(ctx, pod, metav1.GetOptions{})
}

// recentlyChecked hands out the forward of key when it is alive and its pod was confirmed within podRecheck.
func (p *PortForward) recentlyChecked(key string) (string, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	f, ok := p.forwards[key]
	if !ok || p.closed || !f.alive() || p.now().Sub(f.checked) >= podRecheck {
		return "", false
	}
	return f.addr, true
}

// openAs opens the forward for key while the others wait for it (called with p.mu held; it unlocks), and
// keeps it unless the dialer was closed meanwhile.
func (p *PortForward) openAs(ctx context.Context, key, namespace, pod string, port int, uid types.UID) (string, error) {
	openCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	o := &opening{done: make(chan struct{}), cancel: cancel}
	p.opening[key] = o
	p.mu.Unlock()

	f, err := p.openForward(openCtx, namespace, pod, port)

	p.mu.Lock()
	defer p.mu.Unlock()
	delete(p.opening, key)
	if p.closed {
		// Close could not stop what was not open yet; this forward must not outlive the dialer.
		if err == nil {
			close(f.stop)
		}
		f, err = nil, errClosed
	}
	if err == nil {
		f.uid, f.checked = uid, p.now()
		p.forwards[key] = f
	}
	o.f, o.err = f, err
	close(o.done)
	if err != nil {
		return "", err
	}
	return f.addr, nil
}

// open opens a channelForward, or client-go's SPDY forwarder where the channel protocol is not served. Only
// a SPDY forward that opened where a channel forward could not makes the dialer keep to SPDY: a pod that is
// not running refuses both.
func (p *PortForward) open(ctx context.Context, namespace, pod string, port int) (*forward, error) {
	url := p.kube.CoreV1().RESTClient().Post().Resource("pods").Namespace(namespace).Name(pod).SubResource("portforward").URL()
	if !p.spdyOnly.Load() {
		f, err := openChannelForward(ctx, channelDialer(p.cfg, url, port))
		if err == nil || !needsSPDY(err) {
			return f, upgradeCause(err)
		}
		f, spdyErr := p.openSPDY(ctx, url, port)
		if spdyErr != nil {
			return nil, spdyErr
		}
		p.spdyOnly.Store(true)
		return f, nil
	}
	return p.openSPDY(ctx, url, port)
}

// openSPDY opens client-go's forwarder, as `kubectl port-forward` does: SPDY in a websocket first, bare SPDY
// when the server does not upgrade websockets.
func (p *PortForward) openSPDY(ctx context.Context, url *url.URL, port int) (*forward, error) {
	transport, upgrader, err := spdy.RoundTripperFor(p.cfg)
	if err != nil {
		return nil, err
	}
	spdyDialer := spdy.NewDialer(upgrader, &http.Client{Transport: transport}, http.MethodPost, url)
	wsDialer, err := portforward.NewSPDYOverWebsocketDialer(url, p.cfg)
	if err != nil {
		return nil, err
	}
	dialer := portforward.NewFallbackDialer(wsDialer, spdyDialer, func(err error) bool {
		return httpstream.IsUpgradeFailure(err) || httpstream.IsHTTPSProxyError(err)
	})

	f := &forward{stop: make(chan struct{}), done: make(chan struct{})}
	ready := make(chan struct{})
	pf, err := portforward.NewOnAddresses(dialer, []string{"127.0.0.1"}, []string{fmt.Sprintf("0:%d", port)}, f.stop, ready, io.Discard, io.Discard)
	if err != nil {
		return nil, err
	}
	go func() {
		err := pf.ForwardPorts()
		f.errMu.Lock()
		f.err = err
		f.errMu.Unlock()
		close(f.done)
	}()
	timeout := time.NewTimer(30 * time.Second)
	defer timeout.Stop()
	select {
	case <-ready:
	case <-f.done:
		f.errMu.Lock()
		defer f.errMu.Unlock()
		if f.err == nil {
			return nil, errors.New("forward ended before it was ready")
		}
		return nil, f.err
	case <-ctx.Done():
		close(f.stop)
		return nil, ctx.Err()
	case <-timeout.C:
		close(f.stop)
		return nil, errors.New("forward not ready after 30s")
	}
	ports, err := pf.GetPorts()
	if err != nil || len(ports) == 0 {
		close(f.stop)
		return nil, fmt.Errorf("no local port: %v", err)
	}
	f.addr = fmt.Sprintf("127.0.0.1:%d", ports[0].Local)
	return f, nil
}

// Ended implements Ending: the channel closes when the forward serving endpoint ends, whether its stream was
// lost or it was released or replaced; an address this dialer no longer serves has ended already.
func (p *PortForward) Ended(endpoint string) <-chan struct{} {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, f := range p.forwards {
		if f.addr == endpoint {
			return f.done
		}
	}
	return alreadyEnded
}

// Opening implements Opening: a connection of the forward serving endpoint waits for its websocket now.
func (p *PortForward) Opening(endpoint string) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, f := range p.forwards {
		if f.addr == endpoint {
			return f.opening.Load() > 0
		}
	}
	return false
}

var alreadyEnded = func() chan struct{} {
	c := make(chan struct{})
	close(c)
	return c
}()

// Release implements Dialer: it stops the pod's forward; the next Endpoint call opens a new one. A forward
// still being opened is left to finish: its callers asked before the release, and it is checked like any
// other (stream alive, same pod UID) before it is handed out again.
func (p *PortForward) Release(namespace, pod string, port int) {
	key := fmt.Sprintf("%s/%s:%d", namespace, pod, port)
	p.mu.Lock()
	defer p.mu.Unlock()
	if f, ok := p.forwards[key]; ok {
		close(f.stop)
		delete(p.forwards, key)
	}
}

// Close implements Dialer.
func (p *PortForward) Close() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	for key, f := range p.forwards {
		close(f.stop)
		delete(p.forwards, key)
	}
	// Forwards still being opened are abandoned; one that opens anyway is stopped by the caller opening it.
	for _, o := range p.opening {
		o.cancel()
	}
	p.closed = true
	return nil
}
