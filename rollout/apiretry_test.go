package rollout

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	k8stesting "k8s.io/client-go/testing"

	"github.com/etcd-rollout/pulumi-etcd-rollout/rollout/internal/kubeapi"
)

func TestRunRidesOutAnAPIServerOutage(t *testing.T) {
	c := newFakeCluster(t, 3, 1)
	failures := 0
	c.kube.PrependReactor("patch", "statefulsets", func(k8stesting.Action) (bool, runtime.Object, error) {
		if failures < 2 {
			failures++
			return true, nil, apierrors.NewServiceUnavailable("apiserver restarting")
		}
		return false, nil, nil
	})
	res, err := c.engine(t, nil).Run(context.Background())
	require.NoError(t, err)
	assert.Equal(t, 2, failures)
	assert.Len(t, res.MembersRolled, 3)
	assert.Equal(t, 3, c.partition())
}

func TestWithAPIRetryStopsOnPermanentErrors(t *testing.T) {
	calls := 0
	notFound := apierrors.NewNotFound(schema.GroupResource{Group: "apps", Resource: "statefulsets"}, "etcd")
	err := kubeapi.WithRetry(context.Background(), func(context.Context) error { calls++; return notFound })
	assert.True(t, apierrors.IsNotFound(err))
	assert.Equal(t, 1, calls)

	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	calls = 0
	err = kubeapi.WithRetry(ctx, func(context.Context) error { calls++; return errors.New("connection refused") })
	assert.ErrorContains(t, err, "connection refused", "what the API server said comes first")
	assert.ErrorIs(t, err, context.Canceled, "and why the retries stopped: a cancelled run must read as cancelled")
	assert.Equal(t, 1, calls)
}

// A re-lock the API server refuses for good (RBAC) fails at once instead of retrying for relockTimeout.
func TestRelockStopsOnPermanentErrors(t *testing.T) {
	c := newFakeCluster(t, 3, 1)
	c.kube.PrependReactor("patch", "statefulsets", func(k8stesting.Action) (bool, runtime.Object, error) {
		return true, nil, apierrors.NewForbidden(schema.GroupResource{Group: "apps", Resource: "statefulsets"}, "etcd", errors.New("RBAC"))
	})
	e := c.engine(t, nil)
	_, err := e.lease.Acquire(context.Background()) // a re-lock writes only on a lease the run holds
	require.NoError(t, err)
	start := time.Now()
	err = e.relock(context.Background())
	require.Error(t, err)
	assert.True(t, apierrors.IsForbidden(err), "%v", err)
	assert.Contains(t, err.Error(), "run `etcd-rollout unlock`")
	assert.Less(t, time.Since(start), relockTimeout/2, "no waiting out a refusal")
}
