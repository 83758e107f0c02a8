package kubeapi

import "k8s.io/client-go/rest"

// Client-side limits for the engine's own Kubernetes client when the caller set none. client-go's defaults
// (5 requests/s, bursts of 10) would throttle the gates' two GETs per poll and stretch every wait; these stay
// well below what one StatefulSet's rollout can use, even for ten rolled from one process.
const (
	QPS   = 20
	Burst = 40
)

// WithRateLimits returns cfg with the rollout's rate limits where cfg has none; cfg is not changed.
func WithRateLimits(cfg *rest.Config) *rest.Config {
	if cfg.QPS != 0 || cfg.Burst != 0 || cfg.RateLimiter != nil {
		return cfg
	}
	c := rest.CopyConfig(cfg)
	c.QPS, c.Burst = QPS, Burst
	return c
}
