package memberdial

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"sync"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/httpstream"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/portforward"
	"k8s.io/client-go/transport/spdy"
)

// PortForward opens client-go port-forwards through the API server, one per pod and port, as
// `kubectl port-forward` does: websocket first, SPDY when the server does not upgrade websockets.
type PortForward struct {
	cfg  *rest.Config
	kube kubernetes.Interface

	mu       sync.Mutex
	forwards map[string]*forward
	closed   bool
}

// forward is one open port-forward; done is closed when its stream ends.
type forward struct {
	uid   types.UID
	addr  string
	stop  chan struct{}
	done  chan struct{}
	errMu sync.Mutex
	err   error
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
func NewPortForward(cfg *rest.Config) (*PortForward, error) {
	kube, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("port-forward client: %w", err)
	}
	return &PortForward{cfg: cfg, kube: kube, forwards: map[string]*forward{}}, nil
}

// Endpoint implements Dialer. It looks the pod up first: a new UID means the pod was recreated and the old
// stream, which a real kubelet ties to the old pod, is replaced.
func (p *PortForward) Endpoint(ctx context.Context, namespace, pod string, port int) (string, error) {
	got, err := p.kube.CoreV1().Pods(namespace).Get(ctx, pod, metav1.GetOptions{})
	if err != nil {
		return "", fmt.Errorf("port-forward to %s/%s: %w", namespace, pod, err)
	}
	key := fmt.Sprintf("%s/%s:%d", namespace, pod, port)

	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return "", errors.New("port-forward dialer is closed")
	}
	if f, ok := p.forwards[key]; ok {
		if f.alive() && f.uid == got.UID {
			return f.addr, nil
		}
		close(f.stop)
		delete(p.forwards, key)
	}
	f, err := p.open(ctx, namespace, pod, port)
	if err != nil {
		return "", fmt.Errorf("port-forward to %s/%s port %d: %w", namespace, pod, port, explainForbidden(err, namespace))
	}
	f.uid = got.UID
	p.forwards[key] = f
	return f.addr, nil
}

func (p *PortForward) open(ctx context.Context, namespace, pod string, port int) (*forward, error) {
	url := p.kube.CoreV1().RESTClient().Post().Resource("pods").Namespace(namespace).Name(pod).SubResource("portforward").URL()
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

// Release implements Dialer: it stops the pod's forward; the next Endpoint call opens a new one.
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
	p.closed = true
	return nil
}
