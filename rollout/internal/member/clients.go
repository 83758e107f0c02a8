package member

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"go.etcd.io/etcd/api/v3/etcdserverpb"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
	"google.golang.org/grpc"
	"google.golang.org/grpc/backoff"

	"github.com/etcd-rollout/pulumi-etcd-rollout/rollout/internal/memberlist"
	"github.com/etcd-rollout/pulumi-etcd-rollout/rollout/memberdial"
)

// Status is one member's own answer to the Status RPC.
type Status struct {
	ID           uint64
	Leader       uint64
	IsLearner    bool
	RaftTerm     uint64
	RaftIndex    uint64
	AppliedIndex uint64
	// Version is the member's server version ("3.5.35"); StorageVersion the version of its data's schema
	// ("3.6.0"), which only etcd 3.6 and later report (empty before).
	Version        string
	StorageVersion string
	// DowngradeTarget is the version etcd's downgrade API has been enabled for ("3.5.0"); empty when no
	// downgrade is enabled, or before etcd 3.6.
	DowngradeTarget string
	// Errors are the member's active alarms and errors, as etcd words them.
	Errors []string
	// Revision is the key-value store's revision the member has applied; DbSize the size of its bbolt file
	// in bytes, what a snapshot of it will about weigh.
	Revision int64
	DbSize   int64
}

// Info is one entry of the etcd member list (internal/memberlist, so the planner reads it without etcd's client).
type Info = memberlist.Member

// Clients keeps one single-endpoint etcd client per member, so every request reaches the member it
// names (a multi-endpoint client balances and would send MoveLeader to a follower).
type Clients struct {
	dialer    memberdial.Dialer
	namespace string
	service   string
	port      int
	// tlsConfig returns the client TLS settings without a server name, or nil for plain HTTP; it is called
	// once, on first use, because reading the material needs a pod to exist.
	tlsConfig func(ctx context.Context) (*tls.Config, error)

	// tlsMu guards the one read of the TLS material, which may exec into a pod and take a while; it has its
	// own lock so that the read never holds up members that already have a client, or Forget and Close.
	tlsMu   sync.Mutex
	tls     *tls.Config
	tlsRead bool

	// mu guards clients. Nothing slow runs under it: the dialer (a port-forward can take seconds) is asked
	// before taking it, and clientv3.New does not wait for a connection (no grpc.WithBlock), so one slow
	// member never stalls requests to the others.
	mu      sync.Mutex
	clients map[string]*memberClient
}

type memberClient struct {
	endpoint string
	cli      *clientv3.Client
	// status asks Status over cli's own connection. clientv3's Maintenance.Status dials a new gRPC connection
	// for every call: through a port-forward that is a new stream through the API server and the kubelet per
	// look (five a second per member while a gate polls), with a TLS handshake for mTLS members. In make bench
	// ten-clusters it was most of the engine's CPU, and every closed stream kwok never ended held two
	// goroutines and 64 KB until the forward closed (400 of them at the peak).
	status clientv3.Maintenance
	http   *memberHTTP
	// ended closes when the address stops serving (memberdial.Ending); nil when the dialer cannot tell.
	ended <-chan struct{}
	// opening says a connection to the address waits for its path to the member (memberdial.Opening); nil
	// when the dialer has no such path.
	opening func() bool
	// answered says a call through this address succeeded: its end is then the forward's, not the member's
	// refusal (see read).
	answered atomic.Bool
}

// close closes every connection the client holds to its member.
func (c *memberClient) close() error {
	c.http.close()
	return c.cli.Close()
}

func NewClients(dialer memberdial.Dialer, namespace, service string, port int, tlsConfig func(context.Context) (*tls.Config, error)) *Clients {
	return &Clients{dialer: dialer, namespace: namespace, service: service, port: port, tlsConfig: tlsConfig, clients: map[string]*memberClient{}}
}

// tlsBase returns the client TLS settings shared by every member, reading them on first use; nil means
// plain HTTP.
func (m *Clients) tlsBase(ctx context.Context) (*tls.Config, error) {
	m.tlsMu.Lock()
	defer m.tlsMu.Unlock()
	if !m.tlsRead && m.tlsConfig != nil {
		t, err := m.tlsConfig(ctx)
		if err != nil {
			return nil, err
		}
		m.tls, m.tlsRead = t, true
	}
	return m.tls, nil
}

// identity is who pod must prove to be over TLS.
func (m *Clients) identity(pod string) memberIdentity {
	return newMemberIdentity(pod, m.service, m.namespace)
}

// memberReconnectMax bounds gRPC's reconnect back-off for a member client.
const memberReconnectMax = time.Second

// etcdServiceConfig is the balancing policy clientv3's resolver sets in its first update. Named as the
// default too, gRPC starts with it: otherwise it starts with pick_first, connects, and drops that connection
// for round_robin's own once the update arrives, a second connection per member client, which through a
// port-forward is another upgrade request to the API server and another connection to the member.
const etcdServiceConfig = `{"loadBalancingPolicy": "round_robin"}`

// client returns the member's client, re-created when the dialer hands out a new address (a new forward).
func (m *Clients) client(ctx context.Context, pod string) (*memberClient, error) {
	endpoint, err := m.dialer.Endpoint(ctx, m.namespace, pod, m.port)
	if err != nil {
		return nil, noLookOpening(err)
	}
	base, err := m.tlsBase(ctx)
	if err != nil {
		return nil, err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if c, ok := m.clients[pod]; ok {
		if c.endpoint == endpoint {
			return c, nil
		}
		c.close()
		delete(m.clients, pod)
	}
	cfg := clientv3.Config{
		Endpoints:            []string{endpoint},
		DialTimeout:          5 * time.Second,
		DialKeepAliveTime:    10 * time.Second,
		DialKeepAliveTimeout: 5 * time.Second,
		Logger:               zap.NewNop(),
		// A member that was just restarted refuses connections until etcd listens; gRPC's default reconnect
		// back-off (1 s growing 1.6× to 2 min) then kept the gate waiting up to ~20 s after the member
		// served (make bench: about 1 rollout in 10). Reconnect attempts stay at most memberReconnectMax apart.
		DialOptions: []grpc.DialOption{grpc.WithConnectParams(grpc.ConnectParams{
			Backoff:           backoff.Config{BaseDelay: 100 * time.Millisecond, Multiplier: 1.6, Jitter: 0.2, MaxDelay: memberReconnectMax},
			MinConnectTimeout: 2 * time.Second,
		}), grpc.WithDefaultServiceConfig(etcdServiceConfig)},
	}
	if base != nil {
		// Verification stays on: the member must present a certificate from the CA for one of its own DNS
		// names even though we reach it through a local forward (memberTLSConfig).
		t := memberTLSConfig(base, m.identity(pod))
		cfg.TLS = t
		// gRPC's TLS credentials overwrite ServerName with the dial authority, which would be the forward's
		// 127.0.0.1; the member's name is announced instead. (The certificate check itself does not depend
		// on ServerName: memberTLSConfig checks the names of the member it was built for.)
		cfg.DialOptions = append(cfg.DialOptions, grpc.WithAuthority(t.ServerName))
	}
	cli, err := clientv3.New(cfg)
	if err != nil {
		return nil, fmt.Errorf("etcd client for %s: %w", pod, err)
	}
	c := &memberClient{endpoint: endpoint, cli: cli, http: newMemberHTTP(endpoint, cfg.TLS),
		status: clientv3.NewMaintenanceFromMaintenanceClient(clientv3.RetryMaintenanceClient(cli, cli.ActiveConnection()), cli)}
	if ending, ok := m.dialer.(memberdial.Ending); ok {
		c.ended = ending.Ended(endpoint)
	}
	if opening, ok := m.dialer.(memberdial.Opening); ok {
		c.opening = func() bool { return opening.Opening(endpoint) }
	}
	m.clients[pod] = c
	return c, nil
}

func (m *Clients) Status(ctx context.Context, pod string) (Status, error) {
	var resp *clientv3.StatusResponse
	err := m.read(ctx, pod, func(ctx context.Context, c *memberClient) (err error) {
		if resp, err = c.status.Status(ctx, c.endpoint); err != nil {
			return fmt.Errorf("status of %s: %w", pod, m.explainTLS(pod, explain(ctx, err)))
		}
		return nil
	})
	if err != nil {
		return Status{}, err
	}
	return Status{
		ID: resp.Header.MemberId, Leader: resp.Leader, IsLearner: resp.IsLearner,
		RaftTerm: resp.RaftTerm, RaftIndex: resp.RaftIndex, AppliedIndex: resp.RaftAppliedIndex,
		Version: resp.Version, StorageVersion: resp.StorageVersion, DowngradeTarget: downgradeTarget(resp.DowngradeInfo),
		Errors: resp.Errors, Revision: resp.Header.Revision, DbSize: resp.DbSize,
	}, nil
}

func downgradeTarget(d *etcdserverpb.DowngradeInfo) string {
	if !d.GetEnabled() {
		return ""
	}
	return d.GetTargetVersion()
}

func (m *Clients) MemberList(ctx context.Context, pod string) ([]Info, error) {
	var resp *clientv3.MemberListResponse
	err := m.read(ctx, pod, func(ctx context.Context, c *memberClient) (err error) {
		if resp, err = c.cli.MemberList(ctx); err != nil {
			return fmt.Errorf("member list through %s: %w", pod, explain(ctx, err))
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	out := make([]Info, 0, len(resp.Members))
	for _, mem := range resp.Members {
		out = append(out, Info{ID: mem.ID, Name: mem.Name, IsLearner: mem.IsLearner, PeerURLs: mem.PeerURLs})
	}
	return out, nil
}

func (m *Clients) MoveLeader(ctx context.Context, leaderPod string, to uint64) error {
	c, err := m.client(ctx, leaderPod)
	if err != nil {
		return err
	}
	ctx, done := c.bound(ctx)
	defer done()
	if _, err := c.cli.MoveLeader(ctx, to); err != nil {
		return fmt.Errorf("move leader from %s to member %x: %w", leaderPod, to, forwardEnded(ctx, err))
	}
	return nil
}

func (m *Clients) Downgrade(ctx context.Context, pod string, action DowngradeAction, version string) (string, error) {
	c, err := m.client(ctx, pod)
	if err != nil {
		return "", err
	}
	ctx, done := c.bound(ctx)
	defer done()
	actions := map[DowngradeAction]clientv3.DowngradeAction{
		DowngradeValidate: clientv3.DowngradeValidate, DowngradeEnable: clientv3.DowngradeEnable, DowngradeCancel: clientv3.DowngradeCancel,
	}
	resp, err := c.cli.Downgrade(ctx, actions[action], version)
	if errors.Is(err, rpctypes.ErrNoInflightDowngrade) {
		return "", fmt.Errorf("downgrade %s %s through %s: %w", action, version, pod, ErrNoDowngradeJob)
	}
	if err != nil {
		return "", fmt.Errorf("downgrade %s %s through %s: %w", action, version, pod, explain(ctx, err))
	}
	return resp.Version, nil
}

func (m *Clients) LinearizableRead(ctx context.Context, pod string) error {
	return m.read(ctx, pod, func(ctx context.Context, c *memberClient) error {
		// clientv3 reads are linearizable unless WithSerializable is given; count-only reads no data.
		if _, err := c.cli.Get(ctx, "health", clientv3.WithCountOnly()); err != nil {
			return fmt.Errorf("linearizable read through %s: %w", pod, explain(ctx, err))
		}
		return nil
	})
}

func (m *Clients) Forget(pod string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if c, ok := m.clients[pod]; ok {
		c.close()
		delete(m.clients, pod)
	}
	m.dialer.Release(m.namespace, pod, m.port)
}

func (m *Clients) Close() error {
	m.mu.Lock()
	defer m.mu.Unlock()
	var errs []error
	for pod, c := range m.clients {
		errs = append(errs, c.close())
		delete(m.clients, pod)
	}
	return errors.Join(errs...)
}

// explain turns the etcd client's bare "context deadline exceeded" (it waits for a connection until the
// deadline) into something a person can act on.
func explain(ctx context.Context, err error) error {
	if ended := forwardEnded(ctx, err); ended != err {
		return ended
	}
	if noAnswerInTime(err) {
		return fmt.Errorf("no answer in time: the member is down, not serving its client port, or cut off from a quorum (%w)", err)
	}
	return err
}

// bound returns ctx, ended early when the address the client dials stops serving. gRPC keeps reconnecting to
// a dead forward's closed port, and etcd's client retries the call meanwhile, so without this the call waited
// out its whole deadline: a gate look that cost 3 s instead of one poll interval (make bench: 1 rollout in 5).
func (c *memberClient) bound(ctx context.Context) (context.Context, context.CancelFunc) {
	if c.ended == nil {
		return ctx, func() {}
	}
	bctx, cancel := context.WithCancelCause(ctx)
	finished := make(chan struct{})
	go func() {
		select {
		case <-c.ended:
			cancel(ErrForwardEnded)
		case <-finished:
		case <-bctx.Done():
		}
	}()
	return bctx, func() {
		close(finished)
		cancel(nil)
	}
}
