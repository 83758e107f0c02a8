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
	authzv1 "k8s.io/api/authorization/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	"github.com/etcd-rollout/pulumi-etcd-rollout/tests/harness"
	"github.com/etcd-rollout/pulumi-etcd-rollout/tests/harness/memberapi"
)

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
	role, err := harness.ShippedRole()
	require.NoError(t, err)
	return role
}

// bindServiceAccount creates role in ns (as the admin), a ServiceAccount bound to only that Role, a token for
// it by TokenRequest, and a kubeconfig with that token and the cluster's CA: no other credentials.
func bindServiceAccount(ctx context.Context, t *testing.T, c *harness.Cluster, ns string, role *rbacv1.Role) *rbacSubject {
	t.Helper()
	token, err := c.BindServiceAccount(ctx, ns, role)
	require.NoError(t, err)
	doc, err := c.KubeconfigFor(ns, &clientcmdapi.AuthInfo{Token: token})
	require.NoError(t, err)
	path := filepath.Join(t.TempDir(), "kubeconfig")
	require.NoError(t, os.WriteFile(path, doc, 0o600))
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
	require.True(t, removed, "%s grants no %s on %s", harness.ShippedRoleFile, verb, resource)
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
	// The command first, then these defaults, then the caller's own flags, which override them.
	full := append([]string{args[0]}, "--sts", e.Spec.Name, "-n", e.Namespace, "--kubeconfig", s.kubeconfig,
		"--service", e.Spec.ServiceName, "--cooldown", "300ms", "--ready-timeout", "90s", "--health-timeout", "30s",
		"--ca-file", memberapi.DefaultTLSDir+"/"+memberapi.SecretCA,
		"--cert-file", memberapi.DefaultTLSDir+"/"+memberapi.SecretClientCert,
		"--key-file", memberapi.DefaultTLSDir+"/"+memberapi.SecretClientKey)
	out, err := exec.CommandContext(ctx, bin, append(full, args[1:]...)...).CombinedOutput()
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
