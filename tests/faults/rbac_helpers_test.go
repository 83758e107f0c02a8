//go:build faults

package faults

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	authv1 "k8s.io/api/authentication/v1"
	authzv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"k8s.io/utils/ptr"

	"github.com/etcd-rollout/pulumi-etcd-rollout/tests/harness"
	"github.com/etcd-rollout/pulumi-etcd-rollout/tests/harness/memberapi"
)

// rbacRoleFile is the Role the project ships; the tests bind exactly this file, so a rule the code needs and
// the file lacks fails them.
const rbacRoleFile = "deploy/rbac/role.yaml"

// rbacSubject is a ServiceAccount bound to a Role in one namespace, with a kubeconfig that holds only its
// token: the identity an operator would give the rollout.
type rbacSubject struct {
	c          *harness.Cluster
	ns         string
	role       *rbacv1.Role
	kubeconfig string
}

// loadShippedRole decodes deploy/rbac/role.yaml.
func loadShippedRole(t *testing.T) *rbacv1.Role {
	t.Helper()
	root, err := harness.RepoRoot()
	require.NoError(t, err)
	text, err := os.ReadFile(filepath.Join(root, rbacRoleFile))
	require.NoError(t, err)
	obj, _, err := scheme.Codecs.UniversalDeserializer().Decode(text, nil, nil)
	require.NoError(t, err, "decoding %s", rbacRoleFile)
	role, ok := obj.(*rbacv1.Role)
	require.True(t, ok, "%s holds a %T, not a Role", rbacRoleFile, obj)
	return role
}

// bindServiceAccount creates role in ns (as the admin), a ServiceAccount bound to only that Role, a token for
// it by TokenRequest, and a kubeconfig with that token and the cluster's CA: no other credentials.
func bindServiceAccount(ctx context.Context, t *testing.T, c *harness.Cluster, ns string, role *rbacv1.Role) *rbacSubject {
	t.Helper()
	role = role.DeepCopy()
	role.Namespace = ns
	_, err := c.Kube.RbacV1().Roles(ns).Create(ctx, role, metav1.CreateOptions{})
	require.NoError(t, err)
	_, err = c.Kube.CoreV1().ServiceAccounts(ns).Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "etcd-rollout"}}, metav1.CreateOptions{})
	require.NoError(t, err)
	_, err = c.Kube.RbacV1().RoleBindings(ns).Create(ctx, &rbacv1.RoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "etcd-rollout"},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: role.Name},
		Subjects:   []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Name: "etcd-rollout", Namespace: ns}},
	}, metav1.CreateOptions{})
	require.NoError(t, err)
	tr, err := c.Kube.CoreV1().ServiceAccounts(ns).CreateToken(ctx, "etcd-rollout", &authv1.TokenRequest{
		Spec: authv1.TokenRequestSpec{ExpirationSeconds: ptr.To(int64(3600))},
	}, metav1.CreateOptions{})
	require.NoError(t, err, "TokenRequest for the rollout's ServiceAccount")

	ca := c.Config.CAData
	if len(ca) == 0 {
		ca, err = os.ReadFile(c.Config.CAFile)
		require.NoError(t, err)
	}
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters["local"] = &clientcmdapi.Cluster{Server: c.Config.Host, CertificateAuthorityData: ca}
	cfg.AuthInfos["etcd-rollout"] = &clientcmdapi.AuthInfo{Token: tr.Status.Token}
	cfg.Contexts["etcd-rollout"] = &clientcmdapi.Context{Cluster: "local", AuthInfo: "etcd-rollout", Namespace: ns}
	cfg.CurrentContext = "etcd-rollout"
	path := filepath.Join(t.TempDir(), "kubeconfig")
	require.NoError(t, clientcmd.WriteToFile(*cfg, path))
	return &rbacSubject{c: c, ns: ns, role: role, kubeconfig: path}
}

// setRules replaces the Role's rules, then waits until the API server's authorizer, which reads Roles from an
// informer, agrees that the subject may (allowed) or may not do verb on group/resource.
func (s *rbacSubject) setRules(ctx context.Context, t *testing.T, rules []rbacv1.PolicyRule, verb, group, resource string, allowed bool) {
	t.Helper()
	cur, err := s.c.Kube.RbacV1().Roles(s.ns).Get(ctx, s.role.Name, metav1.GetOptions{})
	require.NoError(t, err)
	cur.Rules = rules
	_, err = s.c.Kube.RbacV1().Roles(s.ns).Update(ctx, cur, metav1.UpdateOptions{})
	require.NoError(t, err)
	require.Eventually(t, func() bool { return s.canI(ctx, t, verb, group, resource) == allowed }, 20*time.Second, 100*time.Millisecond,
		"the authorizer never saw the Role change (%s %s/%s allowed=%v)", verb, group, resource, allowed)
}

// withoutVerb returns rules with verb removed from the rule for resource (dropping the rule when it has no
// verb left), and fails t when the shipped Role has no such verb: the test must remove something real.
func withoutVerb(t *testing.T, rules []rbacv1.PolicyRule, resource, verb string) []rbacv1.PolicyRule {
	t.Helper()
	var out []rbacv1.PolicyRule
	removed := false
	for _, r := range rules {
		r = *r.DeepCopy()
		if contains(r.Resources, resource) {
			var verbs []string
			for _, v := range r.Verbs {
				if v == verb {
					removed = true
					continue
				}
				verbs = append(verbs, v)
			}
			r.Verbs = verbs
			if len(verbs) == 0 {
				continue
			}
		}
		out = append(out, r)
	}
	require.True(t, removed, "%s grants no %s on %s", rbacRoleFile, verb, resource)
	return out
}

func contains(list []string, s string) bool {
	for _, v := range list {
		if v == s {
			return true
		}
	}
	return false
}

// rbacCLI runs bin/etcd-rollout (built by `make etcd-rollout`, a prerequisite of make test-faults) with the
// subject's kubeconfig against the TLS cluster e, and returns its combined output and exit code.
func (s *rbacSubject) rbacCLI(t *testing.T, e *harness.Etcd, args ...string) (string, int) {
	t.Helper()
	root, err := harness.RepoRoot()
	require.NoError(t, err)
	bin := filepath.Join(root, "bin", "etcd-rollout")
	_, err = os.Stat(bin)
	require.NoError(t, err, "%s is missing: run make etcd-rollout (make test-faults does)", bin)
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	args = append(args, "--sts", e.Spec.Name, "-n", e.Namespace, "--kubeconfig", s.kubeconfig,
		"--service", e.Spec.ServiceName, "--cooldown", "300ms", "--ready-timeout", "90s", "--health-timeout", "30s",
		"--ca-file", memberapi.DefaultTLSDir+"/"+memberapi.SecretCA,
		"--cert-file", memberapi.DefaultTLSDir+"/"+memberapi.SecretClientCert,
		"--key-file", memberapi.DefaultTLSDir+"/"+memberapi.SecretClientKey)
	out, err := exec.CommandContext(ctx, bin, args...).CombinedOutput()
	var exit *exec.ExitError
	if errors.As(err, &exit) {
		return string(out), exit.ExitCode()
	}
	require.NoError(t, err, "%s", out)
	return string(out), 0
}

// canI asks the API server whether the subject may do verb on group/resource ("pods/portforward" names a
// subresource) in its namespace: a SubjectAccessReview made by the admin on the ServiceAccount's behalf.
func (s *rbacSubject) canI(ctx context.Context, t *testing.T, verb, group, resource string) bool {
	t.Helper()
	res, sub, _ := strings.Cut(resource, "/")
	r, err := s.c.Kube.AuthorizationV1().SubjectAccessReviews().Create(ctx, &authzv1.SubjectAccessReview{Spec: authzv1.SubjectAccessReviewSpec{
		User:               "system:serviceaccount:" + s.ns + ":etcd-rollout",
		Groups:             []string{"system:serviceaccounts", "system:serviceaccounts:" + s.ns, "system:authenticated"},
		ResourceAttributes: &authzv1.ResourceAttributes{Namespace: s.ns, Verb: verb, Group: group, Resource: res, Subresource: sub},
	}}, metav1.CreateOptions{})
	require.NoError(t, err)
	return r.Status.Allowed
}
