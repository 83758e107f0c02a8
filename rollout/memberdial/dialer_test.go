package memberdial

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestDirectEndpoint(t *testing.T) {
	tests := []struct {
		name    string
		dialer  *Direct
		want    string
		wantErr string
	}{
		{"default domain", NewDirect("etcd"), "etcd-1.etcd.prod.svc:2379", ""},
		{"full domain", &Direct{Service: "etcd", Domain: "svc.cluster.local"}, "etcd-1.etcd.prod.svc.cluster.local:2379", ""},
		{"no service", &Direct{}, "", "no service name"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := tt.dialer.Endpoint(context.Background(), "prod", "etcd-1", 2379)
			if tt.wantErr != "" {
				require.ErrorContains(t, err, tt.wantErr)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tt.want, got)
		})
	}
}
