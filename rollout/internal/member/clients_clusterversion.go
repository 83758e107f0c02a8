package member

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"time"
)

// ClusterVersion asks pod for the version the cluster runs at: etcd's /version endpoint ("etcdcluster"),
// which shares the client port with gRPC. The Status RPC gives only the member's own server version, and the
// cluster version is what decides whether a member of the older minor may still join: etcd raises it once
// every member runs the newer minor, and never lowers it without the downgrade API.
func (m *Clients) ClusterVersion(ctx context.Context, pod string) (string, error) {
	c, err := m.client(ctx, pod)
	if err != nil {
		return "", err
	}
	ctx, done := c.bound(ctx)
	defer done()
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, c.http.base+"/version", nil)
	if err != nil {
		return "", err
	}
	resp, err := c.http.client.Do(req)
	if err != nil {
		return "", fmt.Errorf("cluster version through %s: %w", pod, m.explainTLS(pod, forwardEnded(ctx, err)))
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 4096))
	if err != nil || resp.StatusCode != http.StatusOK {
		return "", fmt.Errorf("cluster version through %s: HTTP %d %s", pod, resp.StatusCode, strings.TrimSpace(string(body)))
	}
	var v struct {
		Cluster string `json:"etcdcluster"`
	}
	if err := json.Unmarshal(body, &v); err != nil || v.Cluster == "" || v.Cluster == "not_decided" {
		return "", fmt.Errorf("cluster version through %s: not decided yet (%s)", pod, strings.TrimSpace(string(body)))
	}
	return v.Cluster, nil
}

// memberHTTP is a member's HTTP client for what etcd serves only over HTTP on the client port (/version).
// It keeps its one connection open for the member client's life: a connection per request, closed by us
// right after etcd closed its side, sent our TLS close_notify to a closed socket, and the reset that came
// back made the port-forward fail that connection, which (client-go ends a whole forward when one of its
// connections fails) cut the member's gRPC connection too (make bench mtls: a healthy member reverted in its
// cool-down, 1 rollout in 12; CI: TestVersionChanges/mtls's downgrade failed). A kept connection is closed
// only while etcd reads it, or when the member is forgotten.
type memberHTTP struct {
	base   string
	client *http.Client
}

// newMemberHTTP returns the HTTP client for the member at endpoint (host:port or a URL); tlsConfig is nil
// for plain HTTP.
func newMemberHTTP(endpoint string, tlsConfig *tls.Config) *memberHTTP {
	addr := endpoint
	if i := strings.Index(addr, "://"); i >= 0 {
		addr = addr[i+3:]
	}
	transport := &http.Transport{
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			return (&net.Dialer{}).DialContext(ctx, "tcp", addr)
		},
		MaxIdleConnsPerHost: 1,
		TLSClientConfig:     tlsConfig,
	}
	scheme := "http"
	if tlsConfig != nil {
		scheme = "https"
	}
	return &memberHTTP{base: scheme + "://" + addr, client: &http.Client{Transport: transport}}
}

func (h *memberHTTP) close() { h.client.CloseIdleConnections() }
