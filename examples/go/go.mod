module github.com/etcd-rollout/pulumi-etcd-rollout/examples/go

go 1.26

require (
	github.com/etcd-rollout/pulumi-etcd-rollout/sdk v0.0.0
	github.com/pulumi/pulumi-kubernetes/sdk/v4 v4.25.0
	github.com/pulumi/pulumi/sdk/v3 v3.276.0
)

replace github.com/etcd-rollout/pulumi-etcd-rollout/sdk => ../../sdk
