package members

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestEtcdBinary(t *testing.T) {
	tests := []struct {
		annotation, version, binary, errHas string
	}{
		{annotation: "", version: "3.6", binary: "etcd"},
		{annotation: "3.6", version: "3.6", binary: "etcd"},
		{annotation: "3.5", version: "3.5", binary: "etcd-v3.5"},
		{annotation: "3.5.21", version: "3.5.21", binary: "etcd-v3.5.21"},
		{annotation: "3.6.0", version: "3.6.0", binary: "etcd-v3.6.0"},
		{annotation: "3.4", errHas: `"3.4": want 3.5, 3.6 or a release`},
		{annotation: "v3.5.21", errHas: `"v3.5.21"`},
		{annotation: "3.5.21-0", errHas: `"3.5.21-0"`},
		{annotation: "3.5.21/../../etcd", errHas: "want 3.5, 3.6 or a release"},
	}
	for _, tt := range tests {
		t.Run(tt.annotation, func(t *testing.T) {
			version, binary, err := etcdBinary(tt.annotation)
			if tt.errHas != "" {
				assert.ErrorContains(t, err, tt.errHas)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, []string{tt.version, tt.binary}, []string{version, binary})
		})
	}
}
