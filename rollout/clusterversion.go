package rollout

import (
	"context"
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
func (m *memberClients) ClusterVersion(ctx context.Context, pod string) (string, error) {
	endpoint, err := m.dialer.Endpoint(ctx, m.namespace, pod, m.port)
	if err != nil {
		return "", err
	}
	base, err := m.tlsBase(ctx)
	if err != nil {
		return "", err
	}
	addr := endpoint
	if i := strings.Index(addr, "://"); i >= 0 {
		addr = addr[i+3:]
	}
	transport := &http.Transport{
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			return (&net.Dialer{}).DialContext(ctx, "tcp", addr)
		},
		DisableKeepAlives: true,
	}
	scheme := "http"
	if base != nil {
		scheme, transport.TLSClientConfig = "https", memberTLSConfig(base, m.identity(pod))
	}
	client := &http.Client{Transport: transport, Timeout: 5 * time.Second}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, scheme+"://"+addr+"/version", nil)
	if err != nil {
		return "", err
	}
	resp, err := client.Do(req)
	if err != nil {
		return "", fmt.Errorf("cluster version through %s: %w", pod, m.explainTLS(pod, err))
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
