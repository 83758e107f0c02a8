package rollout

import (
	"context"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	coordinationv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
	"k8s.io/utils/ptr"
)

// An API server that is away for longer than the lease (a restart) must not end the run: nobody can take
// the lease over meanwhile, and the run confirms the lease before it lowers the partition again.
func TestRunRidesOutAnAPIServerAwayLongerThanTheLease(t *testing.T) {
	c := newFakeCluster(t, 3, 0)
	var away atomic.Bool
	unreachable := func(k8stesting.Action) (bool, runtime.Object, error) {
		if away.Load() {
			return true, nil, apierrors.NewServiceUnavailable("the API server is restarting")
		}
		return false, nil, nil
	}
	c.kube.PrependReactor("get", "leases", unreachable)
	c.kube.PrependReactor("update", "leases", unreachable)
	var once sync.Once
	e := c.engine(t, func(cfg *Config, o *Options) {
		cfg.Cooldown = 100 * time.Millisecond
		o.LeaseDuration = 300 * time.Millisecond
		o.OnEvent = func(ev Event) {
			if strings.HasPrefix(ev.Message, "waiting for etcd-2") {
				once.Do(func() { away.Store(true) })
				time.AfterFunc(time.Second, func() { away.Store(false) }) // three lease durations
			}
		}
	})
	res, err := e.Run(context.Background())
	require.NoError(t, err)
	assert.Equal(t, []string{"etcd-2", "etcd-1", "etcd-0"}, res.MembersRolled)
	assert.Equal(t, 3, c.partition())
}

func TestLeaseConfirm(t *testing.T) {
	tests := []struct {
		name      string
		holder    string
		renewed   time.Duration // ago, as this process remembers it
		wantErr   error
		wantWrite bool
	}{
		{"renewed recently: no API call", "me", 0, nil, false},
		{"stale and still ours: renewed now", "me", time.Minute, nil, true},
		{"stale and taken over meanwhile: lost", "thief", time.Minute, ErrLeaseLost, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			kube := fake.NewClientset(&coordinationv1.Lease{
				ObjectMeta: metav1.ObjectMeta{Name: LeaseName("etcd"), Namespace: "db"},
				Spec:       coordinationv1.LeaseSpec{HolderIdentity: ptr.To(tt.holder), LeaseDurationSeconds: ptr.To(int32(15))},
			})
			l := &rolloutLease{kube: kube, namespace: "db", name: LeaseName("etcd"), holder: "me", duration: 15 * time.Second,
				renewed: time.Now().Add(-tt.renewed)}
			err := l.confirm(context.Background())
			if tt.wantErr != nil {
				require.ErrorIs(t, err, tt.wantErr)
				assert.Contains(t, err.Error(), `now held by "thief"`)
			} else {
				require.NoError(t, err)
			}
			writes := 0
			for _, a := range kube.Actions() {
				if a.GetVerb() == "update" {
					writes++
				}
			}
			assert.Equal(t, tt.wantWrite, writes > 0)
		})
	}
}
