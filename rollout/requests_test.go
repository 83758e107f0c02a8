package rollout

import (
	"context"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"

	"github.com/etcd-rollout/pulumi-etcd-rollout/rollout/internal/kubeapi"
)

// Every request the engine's clientset sends is counted, after any wrapper the caller's config already has,
// and the caller's config is left as it was.
func TestRequestCountingCountsEveryRequest(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.NotFound(w, r)
	}))
	defer srv.Close()
	callerWrapped := 0
	cfg := &rest.Config{Host: srv.URL}
	cfg.Wrap(func(rt http.RoundTripper) http.RoundTripper {
		return roundTripFunc(func(r *http.Request) (*http.Response, error) { callerWrapped++; return rt.RoundTrip(r) })
	})

	e, err := New(NewConfig("etcd", "db", "etcd"), Options{RestConfig: cfg})
	require.NoError(t, err)
	defer e.Close()
	for range 3 {
		_, _ = e.kube.AppsV1().StatefulSets("db").Get(context.Background(), "etcd", metav1.GetOptions{})
	}
	assert.EqualValues(t, 3, e.requests.Count())
	assert.Equal(t, 3, callerWrapped, "the caller's own wrapper still runs")

	plain := &rest.Config{Host: srv.URL}
	_ = kubeapi.WithCounting(plain, &kubeapi.Counter{})
	assert.Nil(t, plain.WrapTransport, "the caller's config is not changed")
}

type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }
