package rollout

import (
	"time"

	"k8s.io/client-go/rest"
)

// defaultPollInterval paces the gates. 500ms made the gate see a Ready pod 250ms late on average, once
// per member: the largest share of what the engine added to a roll's wall time in make bench's easy scenario.
const defaultPollInterval = 200 * time.Millisecond

// Client-side limits for the engine's own Kubernetes client when the caller set none. client-go's defaults
// (5 requests/s, bursts of 10) would throttle the gates' two GETs per poll and stretch every wait;
// these stay well below what one StatefulSet's rollout can use, even for ten rolled from one process.
const (
	rolloutQPS   = 20
	rolloutBurst = 40
)

// withRolloutRateLimits returns cfg with the rollout's rate limits where cfg has none; cfg is not changed.
func withRolloutRateLimits(cfg *rest.Config) *rest.Config {
	if cfg.QPS != 0 || cfg.Burst != 0 || cfg.RateLimiter != nil {
		return cfg
	}
	c := rest.CopyConfig(cfg)
	c.QPS, c.Burst = rolloutQPS, rolloutBurst
	return c
}
