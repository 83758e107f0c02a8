// Package memberdial gives a local address for an etcd member's port, wherever the caller runs.
//
// Outside the cluster (the CLI, the Pulumi provider on a laptop or CI runner) members are reached through
// the API server with a port-forward per pod; inside the cluster they are reached directly by their
// StatefulSet DNS name. Both hand back a plain host:port that an etcd client can dial.
package memberdial

import (
	"context"
	"fmt"
)

// Dialer returns an address at which port of a pod answers.
type Dialer interface {
	// Endpoint returns host:port for the pod's port. A port-forwarding Dialer reuses a working forward and
	// opens a new one when the pod was recreated or the stream broke, so callers should ask again before
	// each use rather than keep the address.
	Endpoint(ctx context.Context, namespace, pod string, port int) (string, error)
	// Release drops whatever the Dialer holds open to the pod's port (a forward and its streams), so the
	// pod's process sees no connection from us while it shuts down.
	Release(namespace, pod string, port int)
	// Close stops every forward the Dialer opened.
	Close() error
}

// Ending is implemented by Dialers whose addresses can stop serving on their own. A port-forward ends for
// good when one forwarded connection fails (client-go's forwarder closes its whole stream, "lost connection
// to pod", and channelForward does the same), as when the pod refuses a connection, which a member does right
// after its restart, before it listens. A call still waiting on that address would wait out its whole
// deadline (3 s per gate look, make bench's stalls).
type Ending interface {
	// Ended returns a channel that is closed once endpoint stops serving, or nil when that is not known.
	Ended(endpoint string) <-chan struct{}
}

// Opening is implemented by Dialers whose addresses carry each connection over a path of their own that is
// opened when the connection is made: a port-forward opens a websocket through the API server for it. While
// one is being opened, nothing the caller sends reaches the member: an API server that accepts the request
// and then hangs (as after it dropped every forward on a restart) leaves the caller's call waiting out its
// deadline with no answer from the member, and that says nothing of the member.
type Opening interface {
	// Opening says a connection to endpoint is waiting for its path to the pod right now.
	Opening(endpoint string) bool
}

// Direct reaches members by their stable StatefulSet DNS name, <pod>.<service>.<namespace>.svc; it is for
// callers running inside the cluster, where that name resolves and no forward is needed.
type Direct struct {
	Service string
	// Domain follows the namespace; "svc" unless the cluster needs the full "svc.cluster.local".
	Domain string
}

// NewDirect returns a Dialer for callers inside the cluster; service is the StatefulSet's governing Service.
func NewDirect(service string) *Direct { return &Direct{Service: service, Domain: "svc"} }

// Endpoint implements Dialer.
func (d *Direct) Endpoint(_ context.Context, namespace, pod string, port int) (string, error) {
	if d.Service == "" {
		return "", fmt.Errorf("direct member address for %s: no service name", pod)
	}
	domain := d.Domain
	if domain == "" {
		domain = "svc"
	}
	return fmt.Sprintf("%s.%s.%s.%s:%d", pod, d.Service, namespace, domain, port), nil
}

// Release implements Dialer; nothing is held.
func (d *Direct) Release(string, string, int) {}

// Close implements Dialer; there is nothing to stop.
func (d *Direct) Close() error { return nil }
