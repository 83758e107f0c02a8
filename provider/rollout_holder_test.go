package provider

import (
	"os"
	"regexp"
	"strconv"
	"testing"

	p "github.com/pulumi/pulumi-go-provider"
	"github.com/pulumi/pulumi/sdk/v3/go/property"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// Every `pulumi up` holds the StatefulSet's Lease under a name of its own: one that finds the Lease of a
// run killed before it (same stack, same resource, same host) must see a predecessor to take over, not
// itself. The name still tells a person refused by it which StatefulSet and which host.
func TestEachRunHoldsTheLeaseUnderItsOwnName(t *testing.T) {
	f := &fakeCluster{uid: "uid-1", state: healthyState("rev-b", 2), result: finished("etcd-2", "etcd-1", "etcd-0")}
	s := server(t, f.deps())
	for range 2 {
		_, err := s.Update(p.UpdateRequest{Urn: rolloutURN, ID: "db/etcd", State: state(nil),
			Inputs: inputs(map[string]property.Value{"versionHash": property.New("v2")})})
		require.NoError(t, err)
	}
	require.Len(t, f.configs, 2)
	host, err := os.Hostname()
	require.NoError(t, err)
	for _, cfg := range f.configs {
		assert.Regexp(t, `^pulumi-etcd-rollout db/etcd @`+regexp.QuoteMeta(host)+`/`+strconv.Itoa(os.Getpid())+`/[0-9a-f]{8}$`, cfg.Holder)
	}
	assert.NotEqual(t, f.configs[0].Holder, f.configs[1].Holder)
}
