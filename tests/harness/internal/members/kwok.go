package members

import (
	"context"
	"fmt"
	"path/filepath"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/etcd-rollout/pulumi-etcd-rollout/tests/harness/memberapi"
)

var (
	portForwardGVR = schema.GroupVersionResource{Group: "kwok.x-k8s.io", Version: "v1alpha1", Resource: "portforwards"}
	execGVR        = schema.GroupVersionResource{Group: "kwok.x-k8s.io", Version: "v1alpha1", Resource: "execs"}
)

// applyKwokRules makes kwok's fake kubelet reach the member: a PortForward that maps the pod's client and
// peer container ports to the member's local ports through the pod's port proxies (podnet.go: so that a
// forwarded connection ends with the pod, as on a real node; so `kubectl port-forward` and client-go port-forward
// reach the real etcd), and an Exec whose commands run on this host in the member dir with ETCDCTL_*
// pointing at the member. kwok matches both by the pod's name and namespace, so they outlive a pod
// re-creation, and they are server-side applied: applying again is harmless.
func (m *member) applyKwokRules(ctx context.Context, l launch) error {
	scheme := "http"
	if l.tls {
		scheme = "https"
	}
	pf := map[string]any{
		"apiVersion": "kwok.x-k8s.io/v1alpha1", "kind": "PortForward",
		"metadata": map[string]any{"name": m.pod, "namespace": m.namespace},
		"spec": map[string]any{"forwards": []any{
			map[string]any{"ports": []any{int64(l.clientPort)}, "target": map[string]any{"address": "127.0.0.1", "port": int64(m.net.client.port)}},
			map[string]any{"ports": []any{int64(l.peerPort)}, "target": map[string]any{"address": "127.0.0.1", "port": int64(m.net.peer.port)}},
		}},
	}
	// A member whose client port refuses connections refuses etcdctl in `kubectl exec` too, as the
	// misconfigured listener of a real pod would: its commands reach it through the pod's client proxy.
	// The others keep the member's own port.
	execPort := m.ports.Client
	if l.faults.clientsRefused {
		execPort = m.net.client.port
	}
	envs := []any{env("ETCDCTL_ENDPOINTS", fmt.Sprintf("%s://127.0.0.1:%d", scheme, execPort))}
	if l.tls {
		envs = append(envs,
			env("ETCDCTL_CACERT", filepath.Join(m.tlsDir(), memberapi.SecretCA)),
			env("ETCDCTL_CERT", filepath.Join(m.tlsDir(), memberapi.SecretClientCert)),
			env("ETCDCTL_KEY", filepath.Join(m.tlsDir(), memberapi.SecretClientKey)))
	}
	ex := map[string]any{
		"apiVersion": "kwok.x-k8s.io/v1alpha1", "kind": "Exec",
		"metadata": map[string]any{"name": m.pod, "namespace": m.namespace},
		"spec":     map[string]any{"execs": []any{map[string]any{"local": map[string]any{"workDir": m.dir, "envs": envs}}}},
	}
	for gvr, obj := range map[schema.GroupVersionResource]map[string]any{portForwardGVR: pf, execGVR: ex} {
		u := &unstructured.Unstructured{Object: obj}
		_, err := m.d.dyn.Resource(gvr).Namespace(m.namespace).Apply(ctx, m.pod, u,
			metav1.ApplyOptions{FieldManager: "etcd-members", Force: true})
		if err != nil {
			return fmt.Errorf("applying kwok %s for %s/%s: %w", u.GetKind(), m.namespace, m.pod, err)
		}
	}
	return nil
}

func env(name, value string) map[string]any { return map[string]any{"name": name, "value": value} }
