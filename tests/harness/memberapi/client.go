package memberapi

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"time"
)

// Client talks to the member daemon's control API (its base URL is MEMBERS_URL in tests/.run/cluster.env).
type Client struct {
	BaseURL string
	HTTP    *http.Client
}

// NewClient returns a client with a short timeout: the daemon is local and answers at once.
func NewClient(baseURL string) *Client {
	return &Client{BaseURL: strings.TrimRight(baseURL, "/"), HTTP: &http.Client{Timeout: 10 * time.Second}}
}

// Members lists every member the daemon knows, in all namespaces.
func (c *Client) Members(ctx context.Context) ([]Member, error) {
	var out []Member
	return out, c.do(ctx, http.MethodGet, "/v1/members", nil, &out)
}

// Member returns the member behind one pod.
func (c *Client) Member(ctx context.Context, namespace, pod string) (Member, error) {
	var out Member
	return out, c.do(ctx, http.MethodGet, memberPath(namespace, pod, ""), nil, &out)
}

// Signal sends a signal to the member's current process.
func (c *Client) Signal(ctx context.Context, namespace, pod string, sig Signal) error {
	return c.do(ctx, http.MethodPost, memberPath(namespace, pod, "/signal"), SignalRequest{Signal: sig}, nil)
}

// SetHangOnTerm makes the member ignore SIGTERM (enabled) or not. It holds for the member's current process.
func (c *Client) SetHangOnTerm(ctx context.Context, namespace, pod string, enabled bool) error {
	return c.do(ctx, http.MethodPost, memberPath(namespace, pod, "/hang-on-term"), HangOnTermRequest{Enabled: enabled}, nil)
}

// Status asks the member for its raft status (the etcd Status RPC, sent by the daemon).
func (c *Client) Status(ctx context.Context, namespace, pod string) (Status, error) {
	var out Status
	return out, c.do(ctx, http.MethodGet, memberPath(namespace, pod, "/status"), nil, &out)
}

// Metrics returns the member's Prometheus text exposition.
func (c *Client) Metrics(ctx context.Context, namespace, pod string) (string, error) {
	var out bytes.Buffer
	err := c.do(ctx, http.MethodGet, memberPath(namespace, pod, "/metrics"), nil, &out)
	return out.String(), err
}

func memberPath(namespace, pod, suffix string) string {
	return "/v1/members/" + url.PathEscape(namespace) + "/" + url.PathEscape(pod) + suffix
}

// do sends in as JSON and decodes the answer into out (*bytes.Buffer receives it raw). A non-2xx answer
// becomes an error carrying the daemon's message.
func (c *Client) do(ctx context.Context, method, path string, in, out any) error {
	var body io.Reader
	if in != nil {
		b, err := json.Marshal(in)
		if err != nil {
			return fmt.Errorf("encoding %s %s: %w", method, path, err)
		}
		body = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, c.BaseURL+path, body)
	if err != nil {
		return fmt.Errorf("member daemon %s %s: %w", method, path, err)
	}
	if in != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := c.HTTP.Do(req)
	if err != nil {
		return fmt.Errorf("member daemon %s %s (is the cluster up? run make cluster-up): %w", method, path, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode/100 != 2 {
		msg, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
		return fmt.Errorf("member daemon %s %s: %s: %s", method, path, resp.Status, strings.TrimSpace(string(msg)))
	}
	switch o := out.(type) {
	case nil:
		return nil
	case *bytes.Buffer:
		_, err = io.Copy(o, resp.Body)
	default:
		err = json.NewDecoder(resp.Body).Decode(out)
	}
	if err != nil {
		return fmt.Errorf("member daemon %s %s: reading answer: %w", method, path, err)
	}
	return nil
}
