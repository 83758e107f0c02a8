package provider

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/blang/semver"
	"github.com/pulumi/pulumi-go-provider/integration"
	"github.com/pulumi/pulumi/sdk/v3/go/common/resource"
	"github.com/pulumi/pulumi/sdk/v3/go/property"
	"github.com/stretchr/testify/require"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/rest"

	"github.com/etcd-rollout/pulumi-etcd-rollout/rollout"
)

// fakeCluster stands in for the cluster and the engine: it serves one observation, and Run either succeeds
// with result, fails with runErr after emitting events, or blocks until cancelled.
type fakeCluster struct {
	mu sync.Mutex

	uid        string // "" means the StatefulSet does not exist
	lookupErr  error
	state      rollout.ClusterState
	observeErr error
	// validateErr is what `downgrade validate` answers; validated records the targets asked for.
	validateErr error
	validated   []string
	// trustErr is what CheckTrust answers (nil: the peers would talk to the restarted members).
	trustErr error
	result   rollout.Result
	runErr   error
	events   []string
	blockRun bool
	// runEvents are emitted as they are (with their step) after events; afterRun changes the cluster as a
	// run would (a re-lock), under the lock, before Run returns.
	runEvents []rollout.Event
	afterRun  func(f *fakeCluster)

	runs     int
	configs  []rollout.Config
	accesses []ClusterAccess
	runCtx   context.Context
}

func (f *fakeCluster) deps() Deps {
	return Deps{
		NewEngine: func(cfg rollout.Config, _ *rest.Config, onEvent func(rollout.Event)) (Engine, error) {
			f.mu.Lock()
			defer f.mu.Unlock()
			f.configs = append(f.configs, cfg)
			return &fakeEngine{f: f, onEvent: onEvent}, nil
		},
		Plan: rollout.PlanRollout,
		LookupUID: func(context.Context, *rest.Config, string, string) (string, error) {
			if f.lookupErr != nil {
				return "", f.lookupErr
			}
			if f.uid == "" {
				return "", fmt.Errorf("reading StatefulSet: %w",
					apierrors.NewNotFound(schema.GroupResource{Group: "apps", Resource: "statefulsets"}, "etcd"))
			}
			return f.uid, nil
		},
		RestConfig: func(a ClusterAccess) (*rest.Config, error) {
			f.mu.Lock()
			defer f.mu.Unlock()
			f.accesses = append(f.accesses, a)
			return &rest.Config{Host: "https://fake"}, nil
		},
	}
}

type fakeEngine struct {
	f       *fakeCluster
	onEvent func(rollout.Event)
}

func (e *fakeEngine) Observe(context.Context) (rollout.ClusterState, error) {
	s := e.f.state
	s.StatefulSetUID = e.f.uid
	return s, e.f.observeErr
}

func (e *fakeEngine) Run(ctx context.Context) (rollout.Result, error) {
	e.f.mu.Lock()
	e.f.runs++
	e.f.runCtx = ctx
	e.f.mu.Unlock()
	for _, msg := range e.f.events {
		e.onEvent(rollout.Event{Time: time.Now(), Message: msg})
	}
	for _, ev := range e.f.runEvents {
		e.onEvent(ev)
	}
	if e.f.afterRun != nil {
		e.f.mu.Lock()
		e.f.afterRun(e.f)
		e.f.mu.Unlock()
	}
	if e.f.blockRun {
		<-ctx.Done()
		return e.f.result, fmt.Errorf("rolling: %w", ctx.Err())
	}
	return e.f.result, e.f.runErr
}

// ValidateDowngrade answers with the cluster's validateErr and records the target asked for.
func (e *fakeEngine) ValidateDowngrade(_ context.Context, _ rollout.ClusterState, target string) error {
	e.f.mu.Lock()
	defer e.f.mu.Unlock()
	e.f.validated = append(e.f.validated, target)
	return e.f.validateErr
}

func (e *fakeEngine) CheckTrust(context.Context, rollout.ClusterState, []int) error {
	e.f.mu.Lock()
	defer e.f.mu.Unlock()
	return e.f.trustErr
}

func (e *fakeEngine) Close() error { return nil }

// healthyState is a locked 3-member cluster, every member at rev, the leader on ordinal leader.
func healthyState(rev string, leader int) rollout.ClusterState {
	s := rollout.ClusterState{Replicas: 3, Partition: 3, UpdateRevision: rev, CurrentRevision: rev, VotingMembers: 3}
	for i := 0; i < 3; i++ {
		s.Members = append(s.Members, rollout.MemberState{
			Ordinal: i, Pod: fmt.Sprintf("etcd-%d", i), PodExists: true, Revision: rev, Ready: true,
			Reachable: true, MemberID: uint64(i + 1), IsLeader: i == leader, RaftTerm: 4, Healthy: true,
		})
	}
	return s
}

const rolloutURN = resource.URN("urn:pulumi:test::proj::etcd-rollout:index:Rollout::etcd")

func server(t *testing.T, deps Deps, opts ...integration.ServerOption) integration.Server {
	t.Helper()
	prov, err := New(deps)
	require.NoError(t, err)
	s, err := integration.NewServer(t.Context(), Name, semver.MustParse("0.1.0"),
		append([]integration.ServerOption{integration.WithProvider(prov)}, opts...)...)
	require.NoError(t, err)
	return s
}

// inputs are valid Rollout inputs; overrides replace or (with property.Value{}) remove keys.
func inputs(overrides map[string]property.Value) property.Map {
	m := map[string]property.Value{
		"stsName":     property.New("etcd"),
		"namespace":   property.New("db"),
		"serviceName": property.New("etcd"),
		"versionHash": property.New("v1"),
		"kubeconfig":  property.New("/tmp/kubeconfig").WithSecret(true),
	}
	for k, v := range overrides {
		if v.IsNull() {
			delete(m, k)
			continue
		}
		m[k] = v
	}
	return property.NewMap(m)
}

// logRecorder captures what the provider logs; the integration server sends provider logs to slog.
type logRecorder struct {
	mu   sync.Mutex
	msgs []string
}

func (l *logRecorder) Enabled(context.Context, slog.Level) bool { return true }
func (l *logRecorder) Handle(_ context.Context, r slog.Record) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.msgs = append(l.msgs, r.Message)
	return nil
}
func (l *logRecorder) WithAttrs([]slog.Attr) slog.Handler { return l }
func (l *logRecorder) WithGroup(string) slog.Handler      { return l }

func (l *logRecorder) messages() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]string{}, l.msgs...)
}

// recordLogs routes slog to a recorder for the rest of the test. Tests that use it do not run in parallel.
func recordLogs(t *testing.T) *logRecorder {
	rec := &logRecorder{}
	old := slog.Default()
	slog.SetDefault(slog.New(rec))
	t.Cleanup(func() { slog.SetDefault(old) })
	return rec
}
