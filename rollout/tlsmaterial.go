package rollout

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"path"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/httpstream"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/remotecommand"
)

// fileReader reads one file as the etcd container sees it. Implementations hold what they read in memory
// only; errors name the path, never the content.
type fileReader func(ctx context.Context, file string) ([]byte, error)

// podFileReader reads files mounted in a pod: from the Secret behind the volume when there is one (no exec
// needed, and only `get secrets` in RBAC), else by running `cat` in the container that mounts it.
func podFileReader(kube kubernetes.Interface, cfg *rest.Config, pod *corev1.Pod) fileReader {
	return func(ctx context.Context, file string) ([]byte, error) {
		container, mount, ok := findMount(pod, file)
		if !ok {
			return nil, &TLSMaterialError{fmt.Sprintf("%s is not under any volume mounted in pod %s", file, pod.Name)}
		}
		if secret, key, ok := secretKey(pod, mount, file); ok {
			s, err := kube.CoreV1().Secrets(pod.Namespace).Get(ctx, secret, metav1.GetOptions{})
			if err != nil {
				return nil, fmt.Errorf("reading %s from secret %s: %w", file, secret, err)
			}
			data, ok := s.Data[key]
			if !ok {
				return nil, &TLSMaterialError{fmt.Sprintf("reading %s: secret %s has no key %q", file, secret, key)}
			}
			return data, nil
		}
		if cfg == nil {
			return nil, fmt.Errorf("reading %s: volume %s is not a Secret and no API config is available for exec", file, mount.Name)
		}
		return execCat(ctx, kube, cfg, pod, container, file)
	}
}

// findMount returns the container and mount that hold file: the deepest mount path that contains it.
func findMount(pod *corev1.Pod, file string) (string, corev1.VolumeMount, bool) {
	file = path.Clean(file)
	var best corev1.VolumeMount
	container, found := "", false
	for _, c := range pod.Spec.Containers {
		for _, m := range c.VolumeMounts {
			mp := path.Clean(m.MountPath)
			if file != mp && !strings.HasPrefix(file, mp+"/") {
				continue
			}
			if !found || len(mp) > len(path.Clean(best.MountPath)) {
				best, container, found = m, c.Name, true
			}
		}
	}
	return container, best, found
}

// secretKey maps a file under a Secret (or projected Secret) volume to the secret and key that back it,
// honouring subPath and items.
func secretKey(pod *corev1.Pod, mount corev1.VolumeMount, file string) (string, string, bool) {
	rel := strings.TrimPrefix(strings.TrimPrefix(path.Clean(file), path.Clean(mount.MountPath)), "/")
	if mount.SubPath != "" {
		rel = path.Join(mount.SubPath, rel)
	}
	for _, v := range pod.Spec.Volumes {
		if v.Name != mount.Name {
			continue
		}
		if v.Secret != nil {
			return v.Secret.SecretName, keyFor(v.Secret.Items, rel), true
		}
		if v.Projected != nil {
			for _, src := range v.Projected.Sources {
				if src.Secret == nil {
					continue
				}
				if len(src.Secret.Items) == 0 || hasItemPath(src.Secret.Items, rel) {
					return src.Secret.Name, keyFor(src.Secret.Items, rel), true
				}
			}
		}
	}
	return "", "", false
}

func keyFor(items []corev1.KeyToPath, rel string) string {
	for _, it := range items {
		if path.Clean(it.Path) == rel {
			return it.Key
		}
	}
	return rel
}

func hasItemPath(items []corev1.KeyToPath, rel string) bool {
	for _, it := range items {
		if path.Clean(it.Path) == rel {
			return true
		}
	}
	return false
}

// execCat reads a file with `cat` in the container, websocket first and SPDY as fallback, like kubectl.
func execCat(ctx context.Context, kube kubernetes.Interface, cfg *rest.Config, pod *corev1.Pod, container, file string) ([]byte, error) {
	req := kube.CoreV1().RESTClient().Post().Resource("pods").Namespace(pod.Namespace).Name(pod.Name).SubResource("exec").
		VersionedParams(&corev1.PodExecOptions{Container: container, Command: []string{"cat", file}, Stdout: true, Stderr: true}, scheme.ParameterCodec)
	spdyExec, err := remotecommand.NewSPDYExecutor(cfg, "POST", req.URL())
	if err != nil {
		return nil, fmt.Errorf("exec into %s to read %s: %w", pod.Name, file, err)
	}
	wsExec, err := remotecommand.NewWebSocketExecutor(cfg, "GET", req.URL().String())
	if err != nil {
		return nil, fmt.Errorf("exec into %s to read %s: %w", pod.Name, file, err)
	}
	exec, err := remotecommand.NewFallbackExecutor(wsExec, spdyExec, func(err error) bool {
		return httpstream.IsUpgradeFailure(err) || httpstream.IsHTTPSProxyError(err)
	})
	if err != nil {
		return nil, fmt.Errorf("exec into %s to read %s: %w", pod.Name, file, err)
	}
	var out, errOut bytes.Buffer
	if err := exec.StreamWithContext(ctx, remotecommand.StreamOptions{Stdout: &out, Stderr: &errOut}); err != nil {
		msg := strings.TrimSpace(errOut.String())
		if len(msg) > 200 {
			msg = msg[:200]
		}
		return nil, fmt.Errorf("exec `cat %s` in %s/%s: %w (stderr: %q)", file, pod.Name, container, err, msg)
	}
	return out.Bytes(), nil
}

// clientTLS builds the client TLS settings from the three files. The server name is set per member later.
func clientTLS(ctx context.Context, read fileReader, files TLSFiles) (*tls.Config, error) {
	ca, err := read(ctx, files.CAFile)
	if err != nil {
		return nil, fmt.Errorf("tls caFile: %w", err)
	}
	cert, err := read(ctx, files.CertFile)
	if err != nil {
		return nil, fmt.Errorf("tls certFile: %w", err)
	}
	key, err := read(ctx, files.KeyFile)
	if err != nil {
		return nil, fmt.Errorf("tls keyFile: %w", err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(ca) {
		return nil, &TLSMaterialError{fmt.Sprintf("tls caFile %s holds no PEM certificate", files.CAFile)}
	}
	pair, err := tls.X509KeyPair(cert, key)
	if err != nil {
		// The parse error never quotes the material, but say only which files to keep it that way.
		return nil, &TLSMaterialError{"tls certFile " + files.CertFile + " and keyFile " + files.KeyFile + " do not form a valid key pair"}
	}
	return &tls.Config{RootCAs: pool, Certificates: []tls.Certificate{pair}, MinVersion: tls.VersionTLS12}, nil
}
