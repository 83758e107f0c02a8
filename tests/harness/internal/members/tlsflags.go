package members

import (
	"context"
	"fmt"
	"os"
	"path"
	"path/filepath"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/etcd-rollout/pulumi-etcd-rollout/rollout"
)

// tlsFileFlags are etcd's flags that name a TLS file, in the order etcdArgs passes them.
var tlsFileFlags = []string{"trusted-ca-file", "cert-file", "key-file", "peer-trusted-ca-file", "peer-cert-file", "peer-key-file"}

// secretFile is the Secret key behind a file the container names.
type secretFile struct {
	secret, key string
}

// tlsFlags are the TLS flags of the container's command line, honoured as etcd reads them (issue 33): each
// file from the Secret key its volume mounts at that path (one Secret or several), written when the
// container starts (etcd loads its trusted CAs then, and re-reads its leaves on every handshake; the
// kubelet's later refresh of a running pod's files is not modelled: a Secret change reaches a member at its
// next start), and the client certificate checks as given.
type tlsFlags struct {
	files                              map[string]secretFile // by flag name
	clientCertAuth, peerClientCertAuth bool
}

// honoured says the container names both sides' TLS files by flag: the member then runs with exactly those.
func (f tlsFlags) honoured() bool {
	return f.files["cert-file"].secret != "" && f.files["peer-cert-file"].secret != ""
}

// readTLSFlags reads the TLS flags of container c of pod and resolves each file to its Secret key. A file on
// no Secret volume is an error: the pod stays Pending with the reason in the daemon log, as a kubelet keeps a
// pod whose volume cannot be mounted.
func readTLSFlags(pod *corev1.Pod, c *corev1.Container) (tlsFlags, error) {
	values := rollout.EtcdFlagValues(c)
	f := tlsFlags{clientCertAuth: values["client-cert-auth"] == "true", peerClientCertAuth: values["peer-client-cert-auth"] == "true"}
	for _, flag := range tlsFileFlags {
		file := values[flag]
		if file == "" {
			continue
		}
		sf, ok := secretFileAt(pod, c, file)
		if !ok {
			return f, fmt.Errorf("pod %s/%s: --%s=%s is on no Secret volume mounted in container %s", pod.Namespace, pod.Name, flag, file, c.Name)
		}
		if f.files == nil {
			f.files = map[string]secretFile{}
		}
		f.files[flag] = sf
	}
	return f, nil
}

// secretFileAt is the Secret key container c sees at file: the deepest mount holding it, its subPath and the
// volume's items.
func secretFileAt(pod *corev1.Pod, c *corev1.Container, file string) (secretFile, bool) {
	file = path.Clean(file)
	var best corev1.VolumeMount
	found := false
	for _, m := range c.VolumeMounts {
		mp := path.Clean(m.MountPath)
		if (file == mp || strings.HasPrefix(file, mp+"/")) && (!found || len(mp) > len(path.Clean(best.MountPath))) {
			best, found = m, true
		}
	}
	if !found {
		return secretFile{}, false
	}
	rel := strings.TrimPrefix(strings.TrimPrefix(file, path.Clean(best.MountPath)), "/")
	if best.SubPath != "" {
		rel = strings.TrimSuffix(path.Join(best.SubPath, rel), "/")
	}
	for _, v := range pod.Spec.Volumes {
		if v.Name != best.Name || v.Secret == nil {
			continue
		}
		key := rel
		for _, it := range v.Secret.Items {
			if path.Clean(it.Path) == rel {
				key = it.Key
			}
		}
		return secretFile{secret: v.Secret.SecretName, key: key}, true
	}
	return secretFile{}, false
}

// write copies every file from its Secret into dir (mode 0600, dir 0700), under the flag's name.
func (f tlsFlags) write(ctx context.Context, d *Daemon, namespace, dir string) error {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("creating TLS dir: %w", err)
	}
	secrets := map[string]*corev1.Secret{}
	for flag, sf := range f.files {
		s, ok := secrets[sf.secret]
		if !ok {
			var err error
			if s, err = d.kube.CoreV1().Secrets(namespace).Get(ctx, sf.secret, metav1.GetOptions{}); err != nil {
				return fmt.Errorf("reading Secret %s/%s for --%s: %w", namespace, sf.secret, flag, err)
			}
			secrets[sf.secret] = s
		}
		v, ok := s.Data[sf.key]
		if !ok {
			return fmt.Errorf("Secret %s/%s has no key %q for --%s", namespace, sf.secret, sf.key, flag)
		}
		if err := os.WriteFile(filepath.Join(dir, flag), v, 0o600); err != nil {
			return fmt.Errorf("writing the file of --%s: %w", flag, err)
		}
	}
	return nil
}

// args are the member's TLS flags with the files written by write into dir.
func (f tlsFlags) args(dir string) []string {
	var out []string
	if f.clientCertAuth {
		out = append(out, "--client-cert-auth")
	}
	if f.peerClientCertAuth {
		out = append(out, "--peer-client-cert-auth")
	}
	for _, flag := range tlsFileFlags {
		if _, ok := f.files[flag]; ok {
			out = append(out, "--"+flag+"="+filepath.Join(dir, flag))
		}
	}
	return out
}
