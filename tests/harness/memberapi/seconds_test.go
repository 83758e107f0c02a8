package memberapi_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"

	"github.com/etcd-rollout/pulumi-etcd-rollout/tests/harness/memberapi"
)

func TestParseSeconds(t *testing.T) {
	tests := []struct {
		in   string
		want time.Duration
		ok   bool
	}{
		{"", 0, true},
		{"0", 0, true},
		{"3", 3 * time.Second, true},
		{"0.25", 250 * time.Millisecond, true},
		{"20", 20 * time.Second, true},
		{"3s", 0, false},
		{"-1", 0, false},
		{"NaN", 0, false},
		{"Inf", 0, false},
		{"90000", 0, false},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			got, err := memberapi.ParseSeconds(tt.in)
			assert.Equal(t, tt.ok, err == nil, "err: %v", err)
			assert.Equal(t, tt.want, got)
		})
	}
}

// What the harness writes the daemon reads back.
func TestFormatSecondsRoundTrips(t *testing.T) {
	for _, d := range []time.Duration{0, 250 * time.Millisecond, 3 * time.Second, 20 * time.Second, 1500 * time.Millisecond} {
		got, err := memberapi.ParseSeconds(memberapi.FormatSeconds(d))
		assert.NoError(t, err)
		assert.Equal(t, d, got, memberapi.FormatSeconds(d))
	}
}
