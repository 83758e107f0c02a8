// Package provider is the Pulumi provider for etcd-rollout: the EtcdRollingUpgrade component (a drop-in for
// the old TypeScript class) and the Rollout custom resource under it that runs the rollout engine.
//
// The split exists because a TypeScript custom resource given `provider: k8sProvider` of another package
// sends that provider to the engine, which then routes our resource's operations to the kubernetes plugin;
// a remote component instead receives it in Construct's providers map. So the component takes the options
// the old class took, and the custom resource child does the work, its Diff being what preview shows.
package provider

import (
	p "github.com/pulumi/pulumi-go-provider"
	"github.com/pulumi/pulumi-go-provider/infer"
)

// Name is the package name: the schema's name, the binary's suffix (pulumi-resource-etcd-rollout) and the
// first segment of every type token.
const Name = "etcd-rollout"

// PluginDownloadURL is the release location the schema and every SDK name, so that the pulumi CLI installs the
// plugin by itself: the github:// scheme reads the repository's GitHub releases.
const PluginDownloadURL = "github://api.github.com/etcd-rollout/pulumi-etcd-rollout"

// Version is set at build time with -ldflags "-X .../provider.Version=...".
var Version = "0.1.0"

// New builds the provider with the given outside-world dependencies.
func New(deps Deps) (p.Provider, error) { return newProvider(deps, readKubeProvider) }

func newProvider(deps Deps, readKube KubeProviderReader) (p.Provider, error) {
	prov, err := infer.NewProviderBuilder().
		WithDisplayName("etcd rollout").
		WithDescription("Rolls etcd StatefulSets member by member with no uncontrolled Raft leader elections.").
		WithKeywords("etcd", "kubernetes", "statefulset", "rollout", "category/utility", "kind/component").
		WithHomepage("https://github.com/etcd-rollout/pulumi-etcd-rollout").
		WithRepository("https://github.com/etcd-rollout/pulumi-etcd-rollout").
		WithPublisher("etcd-rollout").
		// Where the pulumi CLI downloads the plugin for a stack that installed an SDK: this repository's GitHub
		// releases (pulumi-resource-etcd-rollout-v<version>-<os>-<arch>.tar.gz, as make dist names them).
		WithPluginDownloadURL(PluginDownloadURL).
		WithLicense("Apache-2.0").
		WithNamespace("etcd-rollout").
		WithLanguageMap(languageMap()).
		WithResources(infer.Resource(&Rollout{deps: deps})).
		WithComponents(infer.ComponentF(component{readKube: readKube, readLive: deps.ReadLive}.construct)).
		Build()
	if err != nil {
		return p.Provider{}, err
	}
	return withKubeProviderRef(prov), nil
}

// languageMap names the generated SDKs. WithLanguageMap replaces the builder's defaults, so they are restated.
func languageMap() map[string]any {
	return map[string]any{
		"nodejs": map[string]any{
			"packageName":          "pulumi-etcd-rollout",
			"respectSchemaVersion": true,
			"dependencies":         map[string]any{"@pulumi/kubernetes": "4.25.0"},
		},
		"python": map[string]any{
			"packageName":          "pulumi_etcd_rollout",
			"respectSchemaVersion": true,
			"pyproject":            map[string]any{"enabled": true},
		},
		"go": map[string]any{
			"importBasePath":                 "github.com/etcd-rollout/pulumi-etcd-rollout/sdk/go/etcdrollout",
			"generateResourceContainerTypes": true,
			"respectSchemaVersion":           true,
		},
	}
}
