package replacerecord

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/etcd-rollout/pulumi-etcd-rollout/rollout/internal/replace"
)

// Records survive the run that wrote them (a new Store reads them), a later write completes one without
// losing the others, and Clear empties them.
func TestRecordsCrossRuns(t *testing.T) {
	ctx := context.Background()
	kube := fake.NewSimpleClientset()
	got, err := New(kube, "db", "etcd", nil).Load(ctx)
	require.NoError(t, err)
	assert.Empty(t, got, "no ConfigMap: no replacement in flight")

	first := New(kube, "db", "etcd", nil)
	rec := replace.Record{PeerURL: "https://etcd-2.etcd.db.svc:2380", OldID: 0xa2, OldPodUID: "uid-2"}
	require.NoError(t, first.Save(ctx, 2, rec))
	require.NoError(t, first.Save(ctx, 1, replace.Record{PeerURL: "https://etcd-1.etcd.db.svc:2380", OldID: 0xa1}))
	rec.LearnerID = 0xd01
	require.NoError(t, first.Save(ctx, 2, rec))

	got, err = New(kube, "db", "etcd", nil).Load(ctx) // the next run
	require.NoError(t, err)
	assert.Equal(t, map[int]replace.Record{2: rec, 1: {PeerURL: "https://etcd-1.etcd.db.svc:2380", OldID: 0xa1}}, got)

	require.NoError(t, first.Clear(ctx))
	got, err = first.Load(ctx)
	require.NoError(t, err)
	assert.Empty(t, got)
}
