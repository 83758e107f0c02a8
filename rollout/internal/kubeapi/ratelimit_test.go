package kubeapi

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/util/flowcontrol"
)

func TestWithRateLimits(t *testing.T) {
	limiter := flowcontrol.NewFakeAlwaysRateLimiter()
	tests := []struct {
		name      string
		in        rest.Config
		wantQPS   float32
		wantBurst int
	}{
		{name: "client-go defaults are raised", in: rest.Config{Host: "https://x"}, wantQPS: QPS, wantBurst: Burst},
		{name: "a caller's QPS is kept", in: rest.Config{Host: "https://x", QPS: 3}, wantQPS: 3, wantBurst: 0},
		{name: "a caller's burst is kept", in: rest.Config{Host: "https://x", Burst: 7}, wantQPS: 0, wantBurst: 7},
		{name: "a caller's limiter is kept", in: rest.Config{Host: "https://x", RateLimiter: limiter}, wantQPS: 0, wantBurst: 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			in := tt.in
			got := WithRateLimits(&in)
			assert.Equal(t, tt.wantQPS, got.QPS)
			assert.Equal(t, tt.wantBurst, got.Burst)
			assert.Equal(t, tt.in.QPS, in.QPS, "the caller's config is not changed")
			assert.Equal(t, tt.in.Burst, in.Burst, "the caller's config is not changed")
		})
	}
}

// The API retry starts quick for a blip and settles at 2 s while an API server restarts, never below it.
func TestBackoffGrowsToItsCap(t *testing.T) {
	next := Backoff.DelayFunc()
	var got []time.Duration
	for range 7 {
		got = append(got, next())
	}
	ms := time.Millisecond
	assert.Equal(t, []time.Duration{200 * ms, 400 * ms, 800 * ms, 1600 * ms, 2000 * ms, 2000 * ms, 2000 * ms}, got)
}
