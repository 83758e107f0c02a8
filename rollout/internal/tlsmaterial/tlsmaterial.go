// Package tlsmaterial reads the client TLS files the etcd container mounts (from the Secret behind their
// volume, or by exec into the pod) and makes the engine's client TLS settings of them. The material stays in
// memory; it is never logged or persisted.
package tlsmaterial

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"path"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/httpstream"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/remotecommand"

	"github.com/etcd-rollout/pulumi-etcd-rollout/rollout/internal/podfile"
	"github.com/etcd-rollout/pulumi-etcd-rollout/rollout/internal/podpath"
)

// FileReader reads one file as the etcd container sees it. Implementations hold what they read in memory
// only; errors name the path, never the content.
type FileReader func(ctx context.Context, file string) ([]byte, error)

// PodFileReader reads files mounted in a pod: from the Secret or ConfigMap behind the volume when there is one
// (no exec needed, and only `get` in RBAC), else by running `cat` in the container that mounts it.
func PodFileReader(kube kubernetes.Interface, cfg *rest.Config, pod *corev1.Pod) FileReader {
	files := podfile.NewReader(kube, pod.Namespace, nil)
	return func(ctx context.Context, file string) ([]byte, error) {
		c, ok := containerWithMount(pod, file)
		if !ok {
			return nil, &Error{fmt.Sprintf("%s is not under any volume mounted in pod %s", file, pod.Name)}
		}
		data, _, err := files.Read(ctx, &pod.Spec, c, file)
		switch {
		case errors.Is(err, podfile.ErrNoSuchKey):
			return nil, &Error{err.Error()}
		case errors.Is(err, podfile.ErrNotReadable) && cfg != nil:
			return execCat(ctx, kube, cfg, pod, c.Name, file)
		case errors.Is(err, podfile.ErrNotReadable):
			return nil, fmt.Errorf("reading %s: no Secret or ConfigMap holds it and no API config is available for exec: %w", file, err)
		}
		return data, err
	}
}

// containerWithMount is the container of pod that holds file on a volume: the one with the deepest mount path
// that contains it.
func containerWithMount(pod *corev1.Pod, file string) (*corev1.Container, bool) {
	var best *corev1.Container
	depth := -1
	for i := range pod.Spec.Containers {
		c := &pod.Spec.Containers[i]
		if m, ok := podpath.MountOf(c, file); ok && len(path.Clean(m.MountPath)) > depth {
			best, depth = c, len(path.Clean(m.MountPath))
		}
	}
	return best, best != nil
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

// ClientTLS builds the client TLS settings from the three files. The server name is set per member later.
func ClientTLS(ctx context.Context, read FileReader, files Files) (*tls.Config, error) {
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
		return nil, &Error{fmt.Sprintf("tls caFile %s holds no PEM certificate", files.CAFile)}
	}
	pair, err := tls.X509KeyPair(cert, key)
	if err != nil {
		// The parse error never quotes the material, but say only which files to keep it that way.
		return nil, &Error{"tls certFile " + files.CertFile + " and keyFile " + files.KeyFile + " do not form a valid key pair"}
	}
	return &tls.Config{RootCAs: pool, Certificates: []tls.Certificate{pair}, MinVersion: tls.VersionTLS12}, nil
}

// Files names the client certificate files as they are mounted inside the etcd container.
type Files struct {
	CAFile   string
	CertFile string
	KeyFile  string
}

// Error is client TLS material the rollout cannot use, named by its files and never quoted.
type Error struct{ Text string }

func (e *Error) Error() string { return e.Text }
