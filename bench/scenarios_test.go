package main

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestSelectStrategies(t *testing.T) {
	all := strategies(0, 0)
	tests := []struct {
		names   string
		want    []string
		wantErr string
	}{
		{names: "all", want: []string{"default", "default-hardened", "job-like", "engine", "engine-cd0"}},
		{names: "", want: []string{"default", "default-hardened", "job-like", "engine", "engine-cd0"}},
		{names: "engine-cd0", want: []string{"engine-cd0"}},
		{names: "default-hardened, engine", want: []string{"default-hardened", "engine"}},
		{names: "engine-cd1", wantErr: `unknown strategy "engine-cd1"`},
	}
	for _, tt := range tests {
		t.Run(tt.names, func(t *testing.T) {
			got, err := selectStrategies(all, tt.names)
			if tt.wantErr != "" {
				require.ErrorContains(t, err, tt.wantErr)
				return
			}
			require.NoError(t, err)
			var names []string
			for _, s := range got {
				names = append(names, s.Name)
			}
			assert.Equal(t, tt.want, names)
		})
	}
}
