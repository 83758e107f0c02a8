package member

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
)

// What a member says of itself on its metrics page, which needs no credentials etcd would check.

// Incarnation reads the incarnation of the etcd process that serves pod. A member that restarted between two
// looks answers both, and only its incarnation says it broke; a look that could not reach it (ErrNoLook) is
// resolved the same way once it answers again. The whole /metrics page is read (about 160 KB), so the engine
// asks only when it must: when a stability window starts and ends, after a look that could not reach the
// member, and at the end of a cool-down.
func (m *Clients) Incarnation(ctx context.Context, pod string) (Incarnation, error) {
	var inc Incarnation
	err := m.readMetrics(ctx, pod, "process start", func(page io.Reader) (err error) {
		inc, err = scanIncarnation(page)
		return err
	})
	return inc, err
}

// readMetrics reads pod's /metrics page through its kept connection and hands it to scan; what names the
// reading in errors ("process start of etcd-2: …").
func (m *Clients) readMetrics(ctx context.Context, pod, what string, scan func(io.Reader) error) error {
	return m.read(ctx, pod, func(ctx context.Context, c *memberClient) error {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, c.http.base+"/metrics", nil)
		if err != nil {
			return err
		}
		resp, err := c.http.client.Do(req)
		if err != nil {
			return fmt.Errorf("%s of %s: %w", what, pod, forwardEnded(ctx, err))
		}
		defer resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 1<<20))
			return fmt.Errorf("%s of %s: /metrics answered HTTP %d", what, pod, resp.StatusCode)
		}
		err = scan(resp.Body)
		// Read to the end, so the kept connection is reused rather than closed mid-answer (see memberHTTP).
		_, _ = io.Copy(io.Discard, resp.Body)
		if err != nil {
			return fmt.Errorf("%s of %s: %w", what, pod, forwardEnded(ctx, err))
		}
		return nil
	})
}

// ActivePeers is pod's own word on which of its Raft peers it is connected to: the member IDs whose
// activePeersMetric is above 0. It tells a member that does not answer us but still votes (its client port
// refuses us, its port-forward fails) from one that is down.
func (m *Clients) ActivePeers(ctx context.Context, pod string) (map[uint64]bool, error) {
	var peers map[uint64]bool
	err := m.readMetrics(ctx, pod, "peers", func(page io.Reader) (err error) {
		peers, err = scanActivePeers(page)
		return err
	})
	return peers, err
}

// scanActivePeers reads activePeersMetric's series from a Prometheus text page:
// etcd_network_active_peers{Local="8e9e05c52164694d",Remote="91bc3c398fb3c146"} 1
func scanActivePeers(page io.Reader) (map[uint64]bool, error) {
	peers := map[uint64]bool{}
	sc := bufio.NewScanner(page)
	sc.Buffer(make([]byte, 0, 4096), 1<<20)
	for sc.Scan() {
		labels, ok := strings.CutPrefix(sc.Text(), activePeersMetric+"{")
		if !ok {
			continue
		}
		labels, value, ok := strings.Cut(labels, "} ")
		if !ok {
			continue
		}
		_, remote, ok := strings.Cut(labels, `Remote="`)
		if !ok {
			continue
		}
		remote, _, _ = strings.Cut(remote, `"`)
		id, err := strconv.ParseUint(remote, 16, 64)
		if err != nil {
			return nil, fmt.Errorf("%s Remote %q: %w", activePeersMetric, remote, err)
		}
		if v, err := strconv.ParseFloat(strings.TrimSpace(value), 64); err == nil && v > 0 {
			peers[id] = true
		}
	}
	return peers, sc.Err()
}
