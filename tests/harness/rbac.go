package harness

import (
	"context"
	"fmt"
	"os"
	"path/filepath"

	authv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"k8s.io/utils/ptr"
)

// ShippedRoleFile is the least-privilege Role the project ships. Tests bind exactly this file, so a rule the
// code needs and the file lacks fails them.
const ShippedRoleFile = "deploy/rbac/role.yaml"

// ServiceAccountName is the ServiceAccount BindServiceAccount creates.
const ServiceAccountName = "etcd-rollout"

// ShippedRole decodes ShippedRoleFile.
func ShippedRole() (*rbacv1.Role, error) {
	root, err := RepoRoot()
	if err != nil {
		return nil, err
	}
	text, err := os.ReadFile(filepath.Join(root, ShippedRoleFile))
	if err != nil {
		return nil, err
	}
	obj, _, err := scheme.Codecs.UniversalDeserializer().Decode(text, nil, nil)
	if err != nil {
		return nil, fmt.Errorf("decoding %s: %w", ShippedRoleFile, err)
	}
	role, ok := obj.(*rbacv1.Role)
	if !ok {
		return nil, fmt.Errorf("%s holds a %T, not a Role", ShippedRoleFile, obj)
	}
	return role, nil
}

// BindServiceAccount creates role in ns (as the admin), a ServiceAccount bound to only that Role, and a token
// for it from the TokenRequest API: the identity an operator would give the rollout.
func (c *Cluster) BindServiceAccount(ctx context.Context, ns string, role *rbacv1.Role) (token string, err error) {
	role = role.DeepCopy()
	role.Namespace = ns
	if _, err := c.Kube.RbacV1().Roles(ns).Create(ctx, role, metav1.CreateOptions{}); err != nil {
		return "", fmt.Errorf("creating Role %s/%s: %w", ns, role.Name, err)
	}
	sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: ServiceAccountName}}
	if _, err := c.Kube.CoreV1().ServiceAccounts(ns).Create(ctx, sa, metav1.CreateOptions{}); err != nil {
		return "", fmt.Errorf("creating ServiceAccount %s/%s: %w", ns, ServiceAccountName, err)
	}
	binding := &rbacv1.RoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: ServiceAccountName},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: role.Name},
		Subjects:   []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Name: ServiceAccountName, Namespace: ns}},
	}
	if _, err := c.Kube.RbacV1().RoleBindings(ns).Create(ctx, binding, metav1.CreateOptions{}); err != nil {
		return "", fmt.Errorf("binding Role %s/%s: %w", ns, role.Name, err)
	}
	tr, err := c.Kube.CoreV1().ServiceAccounts(ns).CreateToken(ctx, ServiceAccountName, &authv1.TokenRequest{
		Spec: authv1.TokenRequestSpec{ExpirationSeconds: ptr.To(int64(3600))},
	}, metav1.CreateOptions{})
	if err != nil {
		return "", fmt.Errorf("TokenRequest for ServiceAccount %s/%s: %w", ns, ServiceAccountName, err)
	}
	return tr.Status.Token, nil
}

// CAData is the API server's CA certificate, from the kubeconfig's data or its file.
func (c *Cluster) CAData() ([]byte, error) {
	if len(c.Config.CAData) > 0 {
		return c.Config.CAData, nil
	}
	return os.ReadFile(c.Config.CAFile)
}

// KubeconfigFor is a kubeconfig document for this cluster with ns as its namespace and user as its only
// credential, everything inline (no file paths), as a user would paste it into a secret.
func (c *Cluster) KubeconfigFor(ns string, user *clientcmdapi.AuthInfo) ([]byte, error) {
	ca, err := c.CAData()
	if err != nil {
		return nil, fmt.Errorf("reading the cluster's CA: %w", err)
	}
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters["local"] = &clientcmdapi.Cluster{Server: c.Config.Host, CertificateAuthorityData: ca}
	cfg.AuthInfos["etcd-rollout"] = user
	cfg.Contexts["local"] = &clientcmdapi.Context{Cluster: "local", AuthInfo: "etcd-rollout", Namespace: ns}
	cfg.CurrentContext = "local"
	return clientcmd.Write(*cfg)
}
