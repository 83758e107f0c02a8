// Command etcd-rollout-go is a Pulumi program: `pulumi up` applies an etcd manifest and rolls its members
// one by one with EtcdRollingUpgrade. The program itself lives in package etcdprogram so that the
// end-to-end tests can run the very same code through the Automation API.
package main

import (
	"github.com/pulumi/pulumi/sdk/v3/go/pulumi"

	"github.com/etcd-rollout/pulumi-etcd-rollout/examples/go/etcdprogram"
)

func main() { pulumi.Run(etcdprogram.Program) }
