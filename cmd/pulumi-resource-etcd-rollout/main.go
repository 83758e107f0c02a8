// Command pulumi-resource-etcd-rollout is the etcd-rollout Pulumi provider plugin. The pulumi CLI starts it;
// it is not meant to be run by hand.
package main

import (
	"context"
	"fmt"
	"os"
	"strings"

	"github.com/etcd-rollout/pulumi-etcd-rollout/provider"
)

func main() {
	prov, err := provider.New(provider.DefaultDeps())
	if err == nil {
		err = prov.Run(context.Background(), provider.Name, strings.TrimPrefix(provider.Version, "v"))
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "pulumi-resource-%s: %v\n", provider.Name, err)
		os.Exit(1)
	}
}
