//go:build e2e

package e2e

import (
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/etcd-rollout/pulumi-etcd-rollout/tests/harness"
)

// historyPrefix is where the background client (harness.Recorder's default) writes: keys that change on
// purpose during a rollout, so the keyspace checksum leaves them out.
const historyPrefix = "history/"

// keyspaceChecksum is a sha256 over every key outside the background client's prefix, read back
// linearizably, with its value, create and mod revisions and version: a key lost, added, rewritten or
// changed between two checksums changes it. It returns the number of keys hashed too.
func keyspaceChecksum(ctx context.Context, t *testing.T, e *harness.Etcd) (string, int) {
	t.Helper()
	cli, err := e.Client(ctx)
	require.NoError(t, err)
	defer cli.Close()
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	resp, err := cli.Get(ctx, "\x00", clientv3.WithFromKey(), clientv3.WithSort(clientv3.SortByKey, clientv3.SortAscend))
	require.NoError(t, err)
	h := sha256.New()
	n := 0
	for _, kv := range resp.Kvs {
		if strings.HasPrefix(string(kv.Key), historyPrefix) {
			continue
		}
		n++
		for _, field := range [][]byte{kv.Key, kv.Value} {
			_ = binary.Write(h, binary.BigEndian, uint32(len(field)))
			h.Write(field)
		}
		_ = binary.Write(h, binary.BigEndian, []int64{kv.CreateRevision, kv.ModRevision, kv.Version})
	}
	return hex.EncodeToString(h.Sum(nil)), n
}

// memberStatus is one member's Status RPC answer, asked directly on its client port (the harness's view).
func memberStatus(ctx context.Context, e *harness.Etcd, cli *clientv3.Client, ordinal int) (*clientv3.StatusResponse, error) {
	m, err := e.Member(ctx, ordinal)
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	return cli.Status(ctx, m.ClientURL)
}

// downgradeEnabled says whether any member reports etcd's downgrade enabled (etcd 3.6's StatusResponse
// carries it; a 3.5 member reports none), and for which version.
func downgradeEnabled(ctx context.Context, e *harness.Etcd, cli *clientv3.Client) (target string, enabled bool) {
	for i := range e.Spec.Replicas {
		st, err := memberStatus(ctx, e, cli, i)
		if err == nil && st.DowngradeInfo.GetEnabled() {
			return st.DowngradeInfo.GetTargetVersion(), true
		}
	}
	return "", false
}

// requireVersions checks every member's own server version (its Status RPC) and the cluster version it
// reports on /version ("3.6.0" for minor "3.6"). etcd moves the cluster version through Raft, so a follower
// may apply it a moment after the leader: each member gets up to 15 s to agree.
func requireVersions(ctx context.Context, t *testing.T, e *harness.Etcd, server, clusterMinor string) {
	t.Helper()
	for i := range e.Spec.Replicas {
		st, err := e.Status(ctx, i)
		require.NoError(t, err)
		assert.Equal(t, server, st.Version, "%s's server version", e.PodName(i))
		var cluster string
		assert.Eventually(t, func() bool {
			cluster, err = e.ClusterVersion(ctx, i)
			return err == nil && strings.HasPrefix(cluster, clusterMinor+".")
		}, 15*time.Second, 200*time.Millisecond, "%s reports cluster version %q (%v), want %s", e.PodName(i), cluster, err, clusterMinor)
	}
}

// quorumWatch samples, every 200 ms, how many members answer the Status RPC within 2 s: a rollout that
// never loses quorum keeps at least 2 of 3 answering at every sample (it restarts one member at a time).
type quorumWatch struct {
	cancel context.CancelFunc
	done   chan struct{}
	mu     sync.Mutex
	fewest int
	at     time.Duration // when fewest was first seen, after the start
	n      int           // samples
}

func watchQuorum(ctx context.Context, e *harness.Etcd) *quorumWatch {
	ctx, cancel := context.WithCancel(ctx)
	w := &quorumWatch{cancel: cancel, done: make(chan struct{}), fewest: e.Spec.Replicas}
	start := time.Now()
	go func() {
		defer close(w.done)
		for ctx.Err() == nil {
			up := e.Spec.Replicas
			var wg sync.WaitGroup
			var mu sync.Mutex
			for i := range e.Spec.Replicas {
				wg.Add(1)
				go func() {
					defer wg.Done()
					sctx, scancel := context.WithTimeout(ctx, 2*time.Second)
					defer scancel()
					if _, err := e.Status(sctx, i); err != nil {
						mu.Lock()
						up--
						mu.Unlock()
					}
				}()
			}
			wg.Wait()
			if ctx.Err() != nil {
				return // a sample cut short by the stop says nothing
			}
			w.mu.Lock()
			w.n++
			if up < w.fewest {
				w.fewest, w.at = up, time.Since(start)
			}
			w.mu.Unlock()
			select {
			case <-ctx.Done():
			case <-time.After(200 * time.Millisecond):
			}
		}
	}()
	return w
}

// stop ends the watch and checks that a majority answered at every sample.
func (w *quorumWatch) stop(t *testing.T, what string) {
	t.Helper()
	w.cancel()
	<-w.done
	w.mu.Lock()
	defer w.mu.Unlock()
	t.Logf("%s: %d quorum samples, fewest members answering: %d", what, w.n, w.fewest)
	assert.Greater(t, w.n, 5, "%s: the quorum watch sampled the cluster", what)
	assert.GreaterOrEqual(t, w.fewest, 2, "%s: quorum lost %s after the start (%d member(s) answering)", what, w.at.Round(time.Millisecond), w.fewest)
}
