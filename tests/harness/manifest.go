package harness

import (
	"bytes"
	_ "embed"
	"fmt"
	"strings"
	"text/template"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/kubernetes/scheme"

	"github.com/etcd-rollout/pulumi-etcd-rollout/tests/harness/memberapi"
)

// The one template of an etcd cluster: CreateEtcd renders it, and so does cmd/render-manifests for the files
// in tests/manifests (a test keeps them equal), so the tests run exactly what the manifests show.
//
//go:embed etcd.yaml.tmpl
var etcdTemplate string

var etcdTmpl = template.Must(template.New("etcd").Parse(etcdTemplate))

// EtcdSpec describes one etcd cluster to create. Zero fields take the defaults of the production manifests.
type EtcdSpec struct {
	Name        string // StatefulSet name; default "etcd"
	Replicas    int    // default 3
	ServiceName string // headless Service; default Name + "-headless"
	TLS         bool   // client and peer mTLS, certificates in Secret SecretName()
	// Readiness: memberapi.ReadyOnStart (default: no readinessProbe, as in production) or ReadyOnProbe.
	Readiness memberapi.Readiness
	Version   string // "3.6" (default), "3.5" or "3.5.21" (see imageTags)
	// Broken makes every member of the template fail to start.
	Broken bool
	// GracePeriod is terminationGracePeriodSeconds; default 30s.
	GracePeriod time.Duration
	NodeName    string // default the cluster's kwok node
	// StartFaults make every member of the template (or those of StartFaults.Ordinals) start late, slowly,
	// crash-looping or refusing clients (spec.StartDelay = 20*time.Second); zero: at once.
	StartFaults
	// Certs chooses how GenerateTLS mints the server and peer certificates (with TLS); zero: every name.
	Certs CertOptions
	// DataDiesWithPod keeps the data dir on an emptyDir instead of a volumeClaimTemplate, and starts etcd from
	// the start script docs/usage.md shows ("existing" when the data dir is empty and another member answers):
	// the member daemon wipes a member's data when its pod is recreated (not when its container restarts).
	DataDiesWithPod bool
	// SeparatePeerCA (with TLS) signs the peer certificates with a CA of their own, kept with the peer leaf in
	// a second Secret (PeerSecretName: ca.crt, tls.crt, tls.key) mounted at /var/lib/etcd-peer-tls, which the
	// peer flags name: etcd-druid's layout, and the one of the Gardener incident (issue 33).
	SeparatePeerCA bool
}

// PeerSecretName is the Secret of the peer material when SeparatePeerCA.
func (s EtcdSpec) PeerSecretName() string { return s.Name + "-peer-tls" }

// SecretName is the TLS Secret the pods mount, named as the keyspace-etcd-group manifests name theirs.
func (s EtcdSpec) SecretName() string { return s.Name + "-cluster-secret" }

// PodNames lists the pods of the StatefulSet by ordinal.
func (s EtcdSpec) PodNames() []string {
	out := make([]string, s.Replicas)
	for i := range out {
		out[i] = fmt.Sprintf("%s-%d", s.Name, i)
	}
	return out
}

// WithDefaults fills the zero fields and checks the rest.
func (s EtcdSpec) WithDefaults() (EtcdSpec, error) {
	if s.Name == "" {
		s.Name = "etcd"
	}
	if s.Replicas == 0 {
		s.Replicas = 3
	}
	if s.ServiceName == "" {
		s.ServiceName = s.Name + "-headless"
	}
	if s.Readiness == "" {
		s.Readiness = memberapi.ReadyOnStart
	}
	if s.Version == "" {
		s.Version = "3.6"
	}
	if s.GracePeriod == 0 {
		s.GracePeriod = 30 * time.Second
	}
	if s.NodeName == "" {
		s.NodeName = "kwok-node-0"
	}
	switch {
	case s.Replicas < 1:
		return s, fmt.Errorf("etcd spec %s: replicas %d: want at least 1", s.Name, s.Replicas)
	case checkVersion(s.Version) != nil:
		return s, fmt.Errorf("etcd spec %s: %w", s.Name, checkVersion(s.Version))
	case s.Readiness != memberapi.ReadyOnStart && s.Readiness != memberapi.ReadyOnProbe:
		return s, fmt.Errorf("etcd spec %s: readiness %q: want %q or %q", s.Name, s.Readiness, memberapi.ReadyOnStart, memberapi.ReadyOnProbe)
	case s.SeparatePeerCA && !s.TLS:
		return s, fmt.Errorf("etcd spec %s: a separate peer CA needs TLS", s.Name)
	case s.DataDiesWithPod && s.TLS:
		return s, fmt.Errorf("etcd spec %s: a data dir that dies with the pod is rendered for plain HTTP only", s.Name)
	case s.GracePeriod < 0 || s.GracePeriod%time.Second != 0:
		return s, fmt.Errorf("etcd spec %s: grace period %s: want whole seconds", s.Name, s.GracePeriod)
	}
	if err := s.StartFaults.validateFor(s.Replicas); err != nil {
		return s, fmt.Errorf("etcd spec %s: %w", s.Name, err)
	}
	return s, nil
}

// RenderYAML renders the Service and StatefulSet of spec (defaults filled) as a manifest.
func RenderYAML(spec EtcdSpec) ([]byte, error) {
	s, err := spec.WithDefaults()
	if err != nil {
		return nil, err
	}
	scheme := "http"
	if s.TLS {
		scheme = "https"
	}
	peers, clients := make([]string, s.Replicas), make([]string, s.Replicas)
	for i, pod := range s.PodNames() {
		peers[i] = fmt.Sprintf("%s=%s://%s.%s.$(POD_NAMESPACE).svc:2380", pod, scheme, pod, s.ServiceName)
		clients[i] = fmt.Sprintf("%s://%s.%s.$(POD_NAMESPACE).svc:2379", scheme, pod, s.ServiceName)
	}
	data := struct {
		EtcdSpec
		SecretName, PeerSecretName, Scheme, InitialCluster, ClientEndpoints, Image string
		GracePeriodSeconds                                                         int64
	}{s, s.SecretName(), s.PeerSecretName(), scheme, strings.Join(peers, ","), strings.Join(clients, ","), etcdImage(s.Version), int64(s.GracePeriod / time.Second)}
	var buf bytes.Buffer
	if err := etcdTmpl.Execute(&buf, data); err != nil {
		return nil, fmt.Errorf("rendering etcd manifest %s: %w", s.Name, err)
	}
	return buf.Bytes(), nil
}

// Render returns the typed objects of spec's manifest.
func Render(spec EtcdSpec) (*corev1.Service, *appsv1.StatefulSet, error) {
	y, err := RenderYAML(spec)
	if err != nil {
		return nil, nil, err
	}
	var svc *corev1.Service
	var sts *appsv1.StatefulSet
	for _, doc := range strings.Split(string(y), "\n---\n") {
		obj, _, err := scheme.Codecs.UniversalDeserializer().Decode([]byte(doc), nil, nil)
		if err != nil {
			return nil, nil, fmt.Errorf("decoding rendered etcd manifest %s: %w", spec.Name, err)
		}
		switch o := obj.(type) {
		case *corev1.Service:
			svc = o
		case *appsv1.StatefulSet:
			sts = o
		}
	}
	if svc == nil || sts == nil {
		return nil, nil, fmt.Errorf("rendered etcd manifest %s lacks its Service or StatefulSet", spec.Name)
	}
	return svc, sts, nil
}

// ManifestFiles are the checked-in manifests under tests/manifests, by file name: the two production shapes.
func ManifestFiles() map[string]EtcdSpec {
	return map[string]EtcdSpec{
		"etcd.yaml":                  {Name: "etcd", ServiceName: "etcd-headless"},
		"keyspace-etcd-group-0.yaml": {Name: "keyspace-etcd-group-0", ServiceName: "keyspace-etcd-group-0-peer", TLS: true},
	}
}
