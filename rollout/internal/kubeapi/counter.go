package kubeapi

import (
	"net/http"
	"sync/atomic"

	"k8s.io/client-go/rest"
)

// Counter counts what the engine sends to the API server: at fleet scale (a hundred etcd clusters rolled from
// one `pulumi up`) the engine's polling is load on the API server, and a number in every run's result is what
// keeps that load measured rather than guessed.
type Counter struct{ n atomic.Int64 }

// Count is the number of requests counted so far.
func (c *Counter) Count() int64 { return c.n.Load() }

type countingTransport struct {
	next http.RoundTripper
	c    *Counter
}

func (t countingTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	t.c.n.Add(1)
	return t.next.RoundTrip(r)
}

// WithCounting returns a copy of cfg whose every request through its transport (the clientset's calls, and
// the upgrade requests that open port-forwards and execs) is counted by c, after any wrapper cfg already has.
func WithCounting(cfg *rest.Config, c *Counter) *rest.Config {
	out := rest.CopyConfig(cfg)
	out.Wrap(func(rt http.RoundTripper) http.RoundTripper { return countingTransport{next: rt, c: c} })
	return out
}
