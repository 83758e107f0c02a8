//go:build tools

// Package deps pins the main module's direct dependencies while the packages that use them are written.
package deps

import (
	_ "github.com/anishathalye/porcupine"
	_ "github.com/pulumi/pulumi-go-provider"
	_ "github.com/pulumi/pulumi-go-provider/infer"
	_ "github.com/pulumi/pulumi-kubernetes/sdk/v4/go/kubernetes/apps/v1"
	_ "github.com/pulumi/pulumi/sdk/v3/go/auto"
	_ "github.com/pulumi/pulumi/sdk/v3/go/pulumi"
	_ "github.com/spf13/cobra"
	_ "github.com/stretchr/testify/require"
	_ "go.etcd.io/etcd/client/v3"
	_ "k8s.io/client-go/kubernetes"
	_ "k8s.io/client-go/kubernetes/fake"
	_ "k8s.io/client-go/tools/clientcmd"
	_ "k8s.io/client-go/tools/portforward"
	_ "k8s.io/client-go/transport/spdy"
)
