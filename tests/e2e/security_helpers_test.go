//go:build e2e && faults

package e2e

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	"github.com/etcd-rollout/pulumi-etcd-rollout/tests/harness"
	"github.com/etcd-rollout/pulumi-etcd-rollout/tests/harness/memberapi"
)

// needle is one piece of secret material and the forms it could take in a log or a state file.
type needle struct {
	name  string
	forms []string
}

// pemNeedle covers a PEM private key as a log could carry it: a stretch of its base64 body (the PEM itself,
// JSON- or Go-quoted, or wrapped differently), and a stretch of the base64 of the whole PEM (Secret data in
// JSON, client-key-data in a kubeconfig). Stretches are taken from the middle: PEM headers and the first
// bytes of DER are the same for every key.
func pemNeedle(name string, pemText []byte) needle {
	var body strings.Builder
	for _, line := range strings.Split(string(pemText), "\n") {
		if line != "" && !strings.HasPrefix(line, "-----") {
			body.WriteString(strings.TrimSpace(line))
		}
	}
	b := body.String()
	enc := base64.StdEncoding.EncodeToString(pemText)
	return needle{name: name, forms: []string{b[len(b)/2-20 : len(b)/2+20], enc[len(enc)/2-20 : len(enc)/2+20]}}
}

// tokenNeedle covers a bearer token: the whole token and its signature, which is what must never show.
func tokenNeedle(name, token string) needle {
	sig := token[strings.LastIndex(token, ".")+1:]
	return needle{name: name, forms: []string{token, sig}}
}

// leaks returns "<needle> in <where>" for every needle found in text.
func leaks(where, text string, needles []needle) []string {
	var found []string
	for _, n := range needles {
		for _, f := range n.forms {
			if strings.Contains(text, f) {
				found = append(found, fmt.Sprintf("%s in %s", n.name, where))
				break
			}
		}
	}
	return found
}

// leaksInTree greps every file under dir.
func leaksInTree(t *testing.T, dir string, needles []needle) []string {
	t.Helper()
	var found []string
	err := filepath.WalkDir(dir, func(path string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return nil // a socket or a file gone meanwhile
		}
		found = append(found, leaks(path, string(b), needles)...)
		return nil
	})
	require.NoError(t, err)
	return found
}

// credentialedKubeconfig is a kubeconfig document (not a path) with everything inline: the cluster's CA, the
// admin's client certificate and key, and a ServiceAccount token. Both credentials are real, so a leak of
// either is a leak of something that opens the cluster. The ServiceAccount is bound to deploy/rbac/role.yaml
// in ns, so the rollout works whichever of the two the API server authenticates first.
func credentialedKubeconfig(ctx context.Context, t *testing.T, c *harness.Cluster, ns string) (doc string, clientKey []byte, token string) {
	t.Helper()
	readOr := func(data []byte, file string) []byte {
		if len(data) > 0 {
			return data
		}
		b, err := os.ReadFile(file)
		require.NoError(t, err)
		return b
	}
	ca, err := c.CAData()
	require.NoError(t, err)
	cert := readOr(c.Config.CertData, c.Config.CertFile)
	clientKey = readOr(c.Config.KeyData, c.Config.KeyFile)
	require.NotEmpty(t, clientKey, "the harness kubeconfig has a client key")

	token = shippedRoleToken(ctx, t, c, ns)
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters["local"] = &clientcmdapi.Cluster{Server: c.Config.Host, CertificateAuthorityData: ca}
	cfg.AuthInfos["admin"] = &clientcmdapi.AuthInfo{ClientCertificateData: cert, ClientKeyData: clientKey, Token: token}
	cfg.Contexts["local"] = &clientcmdapi.Context{Cluster: "local", AuthInfo: "admin", Namespace: ns}
	cfg.CurrentContext = "local"
	b, err := clientcmd.Write(*cfg)
	require.NoError(t, err)
	return string(b), clientKey, token
}

// tokenKubeconfig is a kubeconfig document whose only credential is a token for a ServiceAccount bound to
// deploy/rbac/role.yaml in ns.
func tokenKubeconfig(ctx context.Context, t *testing.T, c *harness.Cluster, ns string) string {
	t.Helper()
	doc, err := c.KubeconfigFor(ns, &clientcmdapi.AuthInfo{Token: shippedRoleToken(ctx, t, c, ns)})
	require.NoError(t, err)
	return string(doc)
}

// shippedRoleToken creates deploy/rbac/role.yaml in ns, a ServiceAccount bound to it, and returns a token for
// that ServiceAccount from the TokenRequest API.
func shippedRoleToken(ctx context.Context, t *testing.T, c *harness.Cluster, ns string) string {
	t.Helper()
	role, err := harness.ShippedRole()
	require.NoError(t, err)
	token, err := c.BindServiceAccount(ctx, ns, role)
	require.NoError(t, err)
	return token
}

// namespaceEvents is every Kubernetes Event of ns, as JSON.
func namespaceEvents(ctx context.Context, t *testing.T, c *harness.Cluster, ns string) string {
	t.Helper()
	list, err := c.Kube.CoreV1().Events(ns).List(ctx, metav1.ListOptions{})
	require.NoError(t, err)
	b, err := json.Marshal(list)
	require.NoError(t, err)
	return string(b)
}

// syncBuffer is a bytes.Buffer that the Automation API's stream copiers may write from several goroutines.
type syncBuffer struct {
	mu  chan struct{}
	buf bytes.Buffer
}

func newSyncBuffer() *syncBuffer { return &syncBuffer{mu: make(chan struct{}, 1)} }

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu <- struct{}{}
	defer func() { <-s.mu }()
	return s.buf.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu <- struct{}{}
	defer func() { <-s.mu }()
	return s.buf.String()
}

// mtlsSpec is the mTLS StatefulSet the security tests roll: Ready only on /readyz, and a short grace period so
// a member that outlives its SIGTERM does not hold a test up for 30 s.
func mtlsSpec(c *harness.Cluster) harness.EtcdSpec {
	return harness.EtcdSpec{Name: "etcd", ServiceName: "etcd-headless", TLS: true,
		Readiness: memberapi.ReadyOnProbe, GracePeriod: 5 * time.Second, NodeName: c.NodeName}
}
