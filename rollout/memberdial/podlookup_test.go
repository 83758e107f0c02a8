package memberdial

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

// A caller that watches the pods tells the dialer their UIDs: the dialer reads no pod while the lookup
// answers, replaces the forward of a pod the lookup says was recreated, and falls back to a GET when the
// lookup cannot say (its cache not synced yet).
func TestPortForwardTakesPodsFromTheLookup(t *testing.T) {
	tests := []struct {
		name string
		// known is the UID the lookup answers with after the forward opened; "" is "cannot say".
		known    string
		wantGets int
		wantNew  bool
	}{
		{name: "same pod", known: "uid-0", wantGets: 0, wantNew: false},
		{name: "pod recreated", known: "uid-0-again", wantGets: 0, wantNew: true},
		{name: "lookup cannot say", known: "", wantGets: 1, wantNew: false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			opener, kube, p, clock := newClockedForward(t)
			uid := "uid-0"
			WithPodLookup(func(namespace, name string) (*corev1.Pod, bool) {
				if uid == "" || namespace != "db" {
					return nil, false
				}
				return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: namespace, UID: types.UID(uid)}}, true
			})(p)

			before, err := p.Endpoint(context.Background(), "db", "etcd-0", 2379)
			require.NoError(t, err)
			uid = tt.known
			*clock = clock.Add(podRecheck)
			after, err := p.Endpoint(context.Background(), "db", "etcd-0", 2379)
			require.NoError(t, err)

			gets := 0
			for _, a := range kube.Actions() {
				if a.GetVerb() == "get" && a.GetResource().Resource == "pods" {
					gets++
				}
			}
			assert.Equal(t, tt.wantGets, gets, "pod GETs")
			assert.Equal(t, tt.wantNew, before != after, "a new forward")
			assert.Len(t, opener.all(), map[bool]int{false: 1, true: 2}[tt.wantNew])
		})
	}
}
