package memberapi_test

import (
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/etcd-rollout/pulumi-etcd-rollout/tests/harness/memberapi"
)

func TestParseOrdinals(t *testing.T) {
	tests := []struct {
		in   string
		want []int
		ok   bool
	}{
		{"", nil, true},
		{"  ", nil, true},
		{"0", []int{0}, true},
		{"2,0", []int{0, 2}, true},
		{" 0 , 2 ", []int{0, 2}, true},
		{"1,1", []int{1}, true},
		{"0,", nil, false},
		{",", nil, false},
		{"-1", nil, false},
		{"etcd-0", nil, false},
		{"0;2", nil, false},
		{"1.5", nil, false},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			got, err := memberapi.ParseOrdinals(tt.in)
			assert.Equal(t, tt.ok, err == nil, "err: %v", err)
			assert.Equal(t, tt.want, got)
		})
	}
}

// What the harness writes the daemon reads back.
func TestFormatOrdinalsRoundTrips(t *testing.T) {
	for _, in := range [][]int{{0}, {2, 0}, {1, 1, 0}, {0, 1, 2}} {
		got, err := memberapi.ParseOrdinals(memberapi.FormatOrdinals(in))
		assert.NoError(t, err)
		assert.Subset(t, got, in)
		assert.IsIncreasing(t, got)
	}
	assert.Equal(t, "0,2", memberapi.FormatOrdinals([]int{2, 0, 2}))
}
