package harness

import (
	"time"

	"github.com/stretchr/testify/require"

	"github.com/etcd-rollout/pulumi-etcd-rollout/rollout"
	"github.com/etcd-rollout/pulumi-etcd-rollout/tests/harness/memberapi"
)

// Test settings of the engine: a short cool-down keeps suites short (production's is 30s); the gate
// timeouts leave room for a loaded 2-core machine.
const (
	TestCooldown      = 300 * time.Millisecond
	TestReadyTimeout  = 90 * time.Second
	TestHealthTimeout = 30 * time.Second
)

// ClientTLSFiles are the client certificate paths inside the etcd container of the mTLS manifests.
var ClientTLSFiles = rollout.TLSFiles{
	CAFile:   memberapi.DefaultTLSDir + "/" + memberapi.SecretCA,
	CertFile: memberapi.DefaultTLSDir + "/" + memberapi.SecretClientCert,
	KeyFile:  memberapi.DefaultTLSDir + "/" + memberapi.SecretClientKey,
}

// Engine builds the engine under test for this StatefulSet, with the test settings, the client TLS files
// when the cluster is mTLS, and every progress event in the test log; mutate (may be nil) adjusts both
// before the engine is built. The engine is closed when the test ends.
func (m MustEtcd) Engine(mutate func(*rollout.Config, *rollout.Options)) *rollout.Engine {
	m.t.Helper()
	cfg := rollout.NewConfig(m.e.Spec.Name, m.e.Namespace, m.e.Spec.ServiceName)
	cfg.Cooldown, cfg.ReadyTimeout, cfg.HealthTimeout = TestCooldown, TestReadyTimeout, TestHealthTimeout
	// A minor-version change stores its snapshot first: in the test's own directory, never the user's.
	cfg.SnapshotTo = m.t.TempDir()
	if m.e.TLS != nil {
		files := ClientTLSFiles
		cfg.TLS = &files
	}
	t := m.t
	opts := rollout.Options{RestConfig: m.e.c.Config, OnEvent: func(ev rollout.Event) {
		t.Logf("%s %s", ev.Time.Format("15:04:05.000"), ev.Message)
	}}
	if mutate != nil {
		mutate(&cfg, &opts)
	}
	engine, err := rollout.New(cfg, opts)
	require.NoError(m.t, err)
	m.t.Cleanup(func() { _ = engine.Close() })
	return engine
}
