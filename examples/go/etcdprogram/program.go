// Package etcdprogram is the Go example's program: an etcd Service and StatefulSet applied from a manifest
// with pulumi-kubernetes through an explicit kubernetes provider, then rolled by EtcdRollingUpgrade, which
// receives that provider in its options and reads the cluster access from it.
package etcdprogram

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"

	"github.com/pulumi/pulumi-kubernetes/sdk/v4/go/kubernetes"
	corev1 "github.com/pulumi/pulumi-kubernetes/sdk/v4/go/kubernetes/core/v1"
	metav1 "github.com/pulumi/pulumi-kubernetes/sdk/v4/go/kubernetes/meta/v1"
	"github.com/pulumi/pulumi-kubernetes/sdk/v4/go/kubernetes/yaml"
	"github.com/pulumi/pulumi/sdk/v3/go/pulumi"
	"github.com/pulumi/pulumi/sdk/v3/go/pulumi/config"

	"github.com/etcd-rollout/pulumi-etcd-rollout/sdk/go/etcdrollout"
)

// Program is the whole stack. Config: kubeconfig (path), namespace, manifestFile; optional createNamespace
// (default true), stsName (default etcd) and cooldownSeconds (default 1, to keep a demo short).
func Program(ctx *pulumi.Context) error {
	cfg := config.New(ctx, "")
	namespace := cfg.Require("namespace")
	manifestFile := cfg.Require("manifestFile")
	stsName := cfg.Get("stsName") // the rollout's target; a wrong one is refused in preview
	if stsName == "" {
		stsName = "etcd"
	}
	cooldown := cfg.GetInt("cooldownSeconds")
	if cooldown == 0 {
		cooldown = 1
	}

	k8s, err := kubernetes.NewProvider(ctx, "cluster", &kubernetes.ProviderArgs{
		Kubeconfig: pulumi.String(cfg.Require("kubeconfig")),
	})
	if err != nil {
		return err
	}
	var ns []pulumi.Resource
	if createNamespace, err := cfg.TryBool("createNamespace"); err != nil || createNamespace {
		n, err := corev1.NewNamespace(ctx, namespace, &corev1.NamespaceArgs{
			Metadata: &metav1.ObjectMetaArgs{Name: pulumi.String(namespace)},
		}, pulumi.Provider(k8s))
		if err != nil {
			return err
		}
		ns = append(ns, n)
	}
	manifest, err := yaml.NewConfigFile(ctx, "etcd", &yaml.ConfigFileArgs{
		File: manifestFile,
		Transformations: []yaml.Transformation{func(obj map[string]any, _ ...pulumi.ResourceOption) {
			if meta, ok := obj["metadata"].(map[string]any); ok {
				meta["namespace"] = namespace
			}
		}},
	}, pulumi.Provider(k8s), pulumi.DependsOn(ns))
	if err != nil {
		return err
	}
	sts := manifest.GetResource("apps/v1/StatefulSet", "etcd", namespace)
	if sts == nil {
		return fmt.Errorf("%s has no StatefulSet named etcd", manifestFile)
	}
	// Any change to the manifest's text counts as a new version: simple, and never misses a template edit.
	text, err := os.ReadFile(manifestFile)
	if err != nil {
		return err
	}
	sum := sha256.Sum256(text)

	upgrade, err := etcdrollout.NewEtcdRollingUpgrade(ctx, "etcd", &etcdrollout.EtcdRollingUpgradeArgs{
		StsName:         pulumi.String(stsName),
		Namespace:       pulumi.String(namespace),
		ServiceName:     pulumi.String("etcd-headless"),
		VersionHash:     pulumi.String(hex.EncodeToString(sum[:8])),
		CooldownSeconds: pulumi.Int(cooldown),
		DependsOnSts:    pulumi.Any(sts),
	}, pulumi.Providers(k8s), pulumi.Parent(sts))
	if err != nil {
		return err
	}
	ctx.Export("updateRevision", upgrade.UpdateRevision)
	ctx.Export("membersRolled", upgrade.MembersRolled)
	ctx.Export("leaderTransfers", upgrade.LeaderTransfers)
	ctx.Export("unplannedElections", upgrade.UnplannedElections)
	ctx.Export("finishedAt", upgrade.FinishedAt)
	return nil
}
