package provider

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
)

// ClusterAccess is how the provider reaches the cluster, in the order the kubernetes provider itself uses:
// an explicit kubeconfig (a path or the document itself, as pulumi-kubernetes accepts), else client-go's
// default loading rules ($KUBECONFIG, ~/.kube/config, in-cluster). Context and Cluster override the
// kubeconfig's current context, as the kubernetes provider's options of the same names do.
type ClusterAccess struct {
	Kubeconfig string
	Context    string
	Cluster    string
}

// errKubeconfigUnreadable never carries the kubeconfig's text: parse errors can quote the document, and the
// document holds credentials.
var errKubeconfigUnreadable = errors.New("kubeconfig is neither a readable kubeconfig file nor a kubeconfig document (content not shown: it may hold credentials)")

// ResolveRestConfig is the production RestConfigResolver.
func ResolveRestConfig(access ClusterAccess) (*rest.Config, error) {
	overrides := &clientcmd.ConfigOverrides{CurrentContext: access.Context}
	overrides.Context.Cluster = access.Cluster
	if access.Kubeconfig == "" {
		rules := clientcmd.NewDefaultClientConfigLoadingRules()
		cfg, err := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules, overrides).ClientConfig()
		if err != nil {
			return nil, fmt.Errorf("loading cluster access from the default kubeconfig rules ($KUBECONFIG, ~/.kube/config, in-cluster): %w", err)
		}
		return cfg, nil
	}
	api, err := loadKubeconfig(access.Kubeconfig)
	if err != nil {
		return nil, err
	}
	if err := checkContext(api, access.Context); err != nil {
		return nil, err
	}
	contextName := access.Context
	if contextName == "" && api.CurrentContext == "" {
		for only := range api.Contexts { // checkContext made sure there is exactly one
			contextName = only
		}
		overrides.CurrentContext = contextName
	}
	cfg, err := clientcmd.NewNonInteractiveClientConfig(*api, contextName, overrides, nil).ClientConfig()
	if err != nil {
		return nil, fmt.Errorf("building cluster access from the kubeconfig: %w", redact(err, access.Kubeconfig))
	}
	return cfg, nil
}

// loadKubeconfig accepts a path (with ~ expanded) or the document itself, like pulumi-kubernetes does.
func loadKubeconfig(kubeconfig string) (*clientcmdapi.Config, error) {
	if looksLikeDocument(kubeconfig) {
		api, err := clientcmd.Load([]byte(kubeconfig))
		if err != nil {
			return nil, errKubeconfigUnreadable
		}
		return api, nil
	}
	path := kubeconfig
	if rest, ok := strings.CutPrefix(path, "~/"); ok {
		if home, err := os.UserHomeDir(); err == nil {
			path = filepath.Join(home, rest)
		}
	}
	api, err := clientcmd.LoadFromFile(path)
	if err != nil {
		if os.IsNotExist(err) {
			return nil, fmt.Errorf("kubeconfig file %s does not exist", path)
		}
		return nil, fmt.Errorf("kubeconfig file %s: %w", path, errKubeconfigUnreadable)
	}
	return api, nil
}

func looksLikeDocument(s string) bool {
	return strings.Contains(s, "\n") || strings.HasPrefix(strings.TrimSpace(s), "{") || strings.Contains(s, "apiVersion:")
}

// checkContext turns clientcmd's terse "context was not found" into a message that lists what is there.
func checkContext(api *clientcmdapi.Config, name string) error {
	if name == "" {
		if api.CurrentContext == "" && len(api.Contexts) != 1 {
			return fmt.Errorf("the kubeconfig has no current-context and %d contexts (%s): set context", len(api.Contexts), contextNames(api))
		}
		return nil
	}
	if _, ok := api.Contexts[name]; !ok {
		return fmt.Errorf("context %q is not in the kubeconfig (it has: %s)", name, contextNames(api))
	}
	return nil
}

func contextNames(api *clientcmdapi.Config) string {
	names := make([]string, 0, len(api.Contexts))
	for n := range api.Contexts {
		names = append(names, n)
	}
	sort.Strings(names)
	if len(names) == 0 {
		return "none"
	}
	return strings.Join(names, ", ")
}

// redact removes the kubeconfig document from an error message, in case a library quoted it.
func redact(err error, kubeconfig string) error {
	if err == nil || kubeconfig == "" || !looksLikeDocument(kubeconfig) {
		return err
	}
	if strings.Contains(err.Error(), kubeconfig) {
		return errKubeconfigUnreadable
	}
	return err
}
