package harness

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	"k8s.io/apimachinery/pkg/types"
)

// MustEtcd binds an Etcd to one test, so that the engine, fault and end-to-end suites read as the steps they
// take: each call fails the test instead of returning an error, under a deadline of its own. They all
// observe the cluster through the harness, never through the code under test.
type MustEtcd struct {
	t testing.TB
	e *Etcd
}

// Must binds e to t.
func (e *Etcd) Must(t testing.TB) MustEtcd { return MustEtcd{t: t, e: e} }

func (m MustEtcd) ctx(d time.Duration) (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.Background(), d)
}

// Term is the cluster's current Raft term.
func (m MustEtcd) Term() uint64 {
	m.t.Helper()
	ctx, cancel := m.ctx(10 * time.Second)
	defer cancel()
	term, err := m.e.RaftTerm(ctx)
	require.NoError(m.t, err)
	return term
}

// StatefulSet is the StatefulSet as the API server has it now.
func (m MustEtcd) StatefulSet() *appsv1.StatefulSet {
	m.t.Helper()
	ctx, cancel := m.ctx(10 * time.Second)
	defer cancel()
	sts, err := m.e.StatefulSet(ctx)
	require.NoError(m.t, err)
	return sts
}

// Partition is the StatefulSet's rollingUpdate.partition now.
func (m MustEtcd) Partition() int {
	m.t.Helper()
	strategy := m.StatefulSet().Spec.UpdateStrategy
	require.NotNil(m.t, strategy.RollingUpdate, "the StatefulSet has no rollingUpdate")
	require.NotNil(m.t, strategy.RollingUpdate.Partition, "the StatefulSet has no partition")
	return int(*strategy.RollingUpdate.Partition)
}

// Pods returns each ordinal's controller-revision-hash and UID: a new UID is a restart.
func (m MustEtcd) Pods() (revs []string, uids []types.UID) {
	m.t.Helper()
	ctx, cancel := m.ctx(10 * time.Second)
	defer cancel()
	for i := 0; i < m.e.Spec.Replicas; i++ {
		p, err := m.e.Pod(ctx, i)
		require.NoError(m.t, err)
		revs = append(revs, p.Labels[appsv1.ControllerRevisionHashLabelKey])
		uids = append(uids, p.UID)
	}
	return revs, uids
}

// ChangeTemplate makes a new revision (a pod-template annotation set to value, or a fresh one when value is
// empty) and returns it; with the partition locked nothing restarts.
func (m MustEtcd) ChangeTemplate(value string) string {
	m.t.Helper()
	if value == "" {
		value = fmt.Sprintf("v%d", time.Now().UnixNano())
	}
	ctx, cancel := m.ctx(time.Minute)
	defer cancel()
	rev, err := m.e.SetTemplateAnnotation(ctx, "etcd-rollout.test/change", value)
	require.NoError(m.t, err)
	return rev
}

// PlaceLeader moves the Raft leader to ordinal with the harness's own client, so a test's starting position
// never depends on the engine's transfer code.
func (m MustEtcd) PlaceLeader(ordinal int) {
	m.t.Helper()
	ctx, cancel := m.ctx(30 * time.Second)
	defer cancel()
	require.NoError(m.t, m.e.MoveLeader(ctx, ordinal))
}

// MustCreateEtcd creates spec's etcd in ns and waits until every member is healthy (two minutes at most, plus
// what its start faults add), logging how long that took, or fails the test.
func (c *Cluster) MustCreateEtcd(t testing.TB, ns string, spec EtcdSpec) *Etcd {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute+spec.worstStart(max(spec.Replicas, 3)))
	defer cancel()
	start := time.Now()
	e, err := c.CreateEtcd(ctx, ns, spec)
	require.NoError(t, err)
	t.Logf("%s/%s: %d healthy members in %s", ns, e.Spec.Name, e.Spec.Replicas, time.Since(start).Round(time.Millisecond))
	return e
}
