module github.com/etcd-rollout/pulumi-etcd-rollout/tests/e2e

go 1.26.6

require (
	github.com/etcd-rollout/pulumi-etcd-rollout v0.0.0
	github.com/etcd-rollout/pulumi-etcd-rollout/examples/go v0.0.0
	github.com/etcd-rollout/pulumi-etcd-rollout/sdk v0.0.0
	github.com/pulumi/pulumi/sdk/v3 v3.276.0
	github.com/stretchr/testify v1.12.1
)

replace (
	github.com/etcd-rollout/pulumi-etcd-rollout => ../..
	github.com/etcd-rollout/pulumi-etcd-rollout/examples/go => ../../examples/go
	github.com/etcd-rollout/pulumi-etcd-rollout/sdk => ../../sdk
	github.com/mitchellh/mapstructure => github.com/go-viper/mapstructure v1.6.0
	github.com/atotto/clipboard => github.com/tgummerer/clipboard v0.0.0-20241001131231-d02d263e614e
)
