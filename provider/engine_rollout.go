package provider

import (
	"k8s.io/client-go/rest"

	"github.com/etcd-rollout/pulumi-etcd-rollout/rollout"
)

// newRolloutEngine builds the real engine: members are reached by port-forward through the API server (the
// engine's default), since the provider runs wherever the pulumi CLI runs, usually outside the cluster.
func newRolloutEngine(cfg rollout.Config, restConfig *rest.Config, onEvent func(rollout.Event)) (Engine, error) {
	return rollout.New(cfg, rollout.Options{RestConfig: restConfig, OnEvent: onEvent})
}
