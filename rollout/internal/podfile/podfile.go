// Package podfile reads a file that a container sees, from the API object behind the volume that holds it: a
// Secret or ConfigMap key (directly, or through a projected volume), with subPath and items resolved as the
// kubelet resolves them. The engine reads etcd's configuration file this way, and the TLS material a member's
// pod mounts (its client certificate for the engine, and, before a restart, the material the new pod will
// start with). It needs `get` on the Secrets and ConfigMaps involved, never exec; what it reads stays in
// memory, and no error quotes it.
package podfile

import (
	"context"
	"errors"
	"fmt"
	"path"
	"strings"
	"sync"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/etcd-rollout/pulumi-etcd-rollout/rollout/internal/podpath"
)

// Kind of object that holds a file.
type Kind string

const (
	ConfigMap Kind = "ConfigMap"
	Secret    Kind = "Secret"
)

// Source is one object key a file may come from.
type Source struct {
	Kind Kind
	Name string
	Key  string
}

func (s Source) String() string { return fmt.Sprintf("%s %s (key %q)", s.Kind, s.Name, s.Key) }

// ErrNotReadable says the file is on something no API object holds (no volume, an emptyDir, a hostPath, the
// image's own file): only the container can read it.
var ErrNotReadable = errors.New("the file cannot be read from the API")

// ErrNoSuchKey says the object behind the file exists but has no key for it: the container would see no file.
var ErrNoSuchKey = errors.New("no such key")

// Locate finds the object keys that container c of spec sees at file, in the order the kubelet lays them out:
// one for a Secret or ConfigMap volume; for a projected volume, every source that can hold the path (the
// first whose object has the key is the file).
func Locate(spec *corev1.PodSpec, c *corev1.Container, file string) ([]Source, corev1.VolumeMount, error) {
	if !path.IsAbs(file) || strings.ContainsAny(file, "$`") {
		return nil, corev1.VolumeMount{}, fmt.Errorf("%w: %q is not an absolute path the template names", ErrNotReadable, file)
	}
	m, ok := podpath.MountOf(c, file)
	if !ok {
		return nil, m, fmt.Errorf("%w: %s is on no volume mounted in container %s", ErrNotReadable, file, containerName(c))
	}
	inVolume := podpath.InVolume(m, file)
	for _, v := range spec.Volumes {
		if v.Name != m.Name {
			continue
		}
		var out []Source
		switch {
		case v.Secret != nil:
			out = appendKey(out, Secret, v.Secret.SecretName, v.Secret.Items, inVolume)
		case v.ConfigMap != nil:
			out = appendKey(out, ConfigMap, v.ConfigMap.Name, v.ConfigMap.Items, inVolume)
		case v.Projected != nil:
			for _, p := range v.Projected.Sources {
				switch {
				case p.Secret != nil:
					out = appendKey(out, Secret, p.Secret.Name, p.Secret.Items, inVolume)
				case p.ConfigMap != nil:
					out = appendKey(out, ConfigMap, p.ConfigMap.Name, p.ConfigMap.Items, inVolume)
				}
			}
		default:
			return nil, m, fmt.Errorf("%w: %s is on volume %q, which no Secret or ConfigMap backs", ErrNotReadable, file, v.Name)
		}
		if len(out) == 0 {
			return nil, m, fmt.Errorf("%w: no key of volume %q is mounted at %s", ErrNotReadable, v.Name, file)
		}
		return out, m, nil
	}
	return nil, m, fmt.Errorf("%w: %s is on volume %q, which the pod does not define", ErrNotReadable, file, m.Name)
}

// appendKey appends the key of an object that appears at inVolume: the item mapped there, or, without items,
// the key of that name.
func appendKey(out []Source, kind Kind, name string, items []corev1.KeyToPath, inVolume string) []Source {
	if len(items) == 0 {
		if inVolume != "" && !strings.Contains(inVolume, "/") {
			out = append(out, Source{Kind: kind, Name: name, Key: inVolume})
		}
		return out
	}
	for _, it := range items {
		if path.Clean(it.Path) == inVolume {
			return append(out, Source{Kind: kind, Name: name, Key: it.Key})
		}
	}
	return out
}

func containerName(c *corev1.Container) string {
	if c == nil {
		return "etcd"
	}
	return c.Name
}

// Reader reads files from the API.
type Reader struct {
	kube      kubernetes.Interface
	namespace string
	// retry runs one API call again while the API server is briefly away (the engine's kubeapi.WithRetry).
	retry func(context.Context, func(context.Context) error) error
}

// NewReader reads files of pods in namespace; retry, when set, runs each API call as the engine runs its
// others; nil runs it once.
func NewReader(kube kubernetes.Interface, namespace string, retry func(context.Context, func(context.Context) error) error) *Reader {
	if retry == nil {
		retry = func(ctx context.Context, call func(context.Context) error) error { return call(ctx) }
	}
	return &Reader{kube: kube, namespace: namespace, retry: retry}
}

// Read returns the content container c of spec sees at file, and the key it came from.
func (r *Reader) Read(ctx context.Context, spec *corev1.PodSpec, c *corev1.Container, file string) ([]byte, Source, error) {
	return read(ctx, r.namespace, spec, c, file, r.object)
}

// read finds file's object keys and reads them with object, the first whose object has the key being the file.
func read(ctx context.Context, namespace string, spec *corev1.PodSpec, c *corev1.Container, file string,
	object func(context.Context, Source) (map[string][]byte, error)) ([]byte, Source, error) {
	sources, _, err := Locate(spec, c, file)
	if err != nil {
		return nil, Source{}, err
	}
	var missing []string
	for _, src := range sources {
		data, err := object(ctx, src)
		if err != nil && !(len(sources) > 1 && apierrors.IsNotFound(err)) {
			return nil, src, fmt.Errorf("reading %s from %s/%s: %w", file, namespace, src, err)
		}
		if b, ok := data[src.Key]; ok {
			return b, src, nil
		}
		missing = append(missing, src.String())
	}
	return nil, sources[0], fmt.Errorf("reading %s: %w in %s/%s", file, ErrNoSuchKey, namespace, strings.Join(missing, ", "))
}

// object is the data of src's object.
func (r *Reader) object(ctx context.Context, src Source) (data map[string][]byte, err error) {
	err = r.retry(ctx, func(ctx context.Context) error {
		if src.Kind == Secret {
			s, err := r.kube.CoreV1().Secrets(r.namespace).Get(ctx, src.Name, metav1.GetOptions{})
			if err == nil {
				data = s.Data
			}
			return err
		}
		cm, err := r.kube.CoreV1().ConfigMaps(r.namespace).Get(ctx, src.Name, metav1.GetOptions{})
		if err == nil {
			data = map[string][]byte{}
			for k, v := range cm.Data {
				data[k] = []byte(v)
			}
			for k, v := range cm.BinaryData {
				data[k] = v
			}
		}
		return err
	})
	return data, err
}

// Memo reads each object once: one look at a cluster, whose template and pods usually mount the same
// objects (a CA, a certificate and its key from one Secret), reads each once. It is safe for concurrent use;
// a new look takes a new Memo, so a changed object is read again.
type Memo struct {
	r       *Reader
	mu      sync.Mutex
	objects map[objectKey]memoEntry
}

type objectKey struct {
	kind Kind
	name string
}

type memoEntry struct {
	data map[string][]byte
	err  error
}

// Memo starts a look that reads each object once.
func (r *Reader) Memo() *Memo { return &Memo{r: r, objects: map[objectKey]memoEntry{}} }

// Read is Reader.Read, reading each object once in this look.
func (m *Memo) Read(ctx context.Context, spec *corev1.PodSpec, c *corev1.Container, file string) ([]byte, Source, error) {
	return read(ctx, m.r.namespace, spec, c, file, m.object)
}

// object is Reader.object, once per object in this look.
func (m *Memo) object(ctx context.Context, src Source) (map[string][]byte, error) {
	key := objectKey{src.Kind, src.Name}
	m.mu.Lock()
	defer m.mu.Unlock()
	if e, ok := m.objects[key]; ok {
		return e.data, e.err
	}
	data, err := m.r.object(ctx, src)
	m.objects[key] = memoEntry{data, err}
	return data, err
}
