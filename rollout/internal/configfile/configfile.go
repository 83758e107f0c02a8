// Package configfile reads the settings etcd takes from its configuration file (--config-file or
// ETCD_CONFIG_FILE) when the file is mounted from a ConfigMap or a Secret. With a configuration file etcd
// ignores every other flag and ETCD_* variable, so the data dir and the WAL dir (and the member name that the
// default data dir is made of) are known only from the file: the durability classification needs them before
// the engine decides whether a member is restarted or replaced (issue 32; ../shared/notes/shapes.md §1.5).
//
// Locate and Parse are pure; Reader does the one API read.
package configfile

import (
	"context"
	"errors"
	"fmt"
	"path"
	"strings"
	"sync"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/yaml"

	"github.com/etcd-rollout/pulumi-etcd-rollout/rollout/internal/podpath"
)

// Settings are the entries of etcd's configuration file that say where it keeps its data, under the names
// etcd gives them in the file.
type Settings struct {
	Name    string `json:"name"`
	DataDir string `json:"data-dir"`
	WALDir  string `json:"wal-dir"`
}

// Kind of object that holds the file.
type Kind string

const (
	ConfigMap Kind = "ConfigMap"
	Secret    Kind = "Secret"
)

// Source is the object and key the configuration file is mounted from.
type Source struct {
	Kind Kind
	Name string
	Key  string
}

func (s Source) String() string { return fmt.Sprintf("%s %s (key %q)", s.Kind, s.Name, s.Key) }

// ErrNotReadable says the file is mounted from something Locate does not read (no volume, a projected or
// downward API volume, an image's own file): the caller's classification stays unknown.
var ErrNotReadable = errors.New("the configuration file cannot be read from the API")

// Locate finds the ConfigMap or Secret key that the container sees at file: the mount with the longest mount
// path that holds it, its subPath, and the volume's items (a key mounted under another path).
func Locate(spec *corev1.PodSpec, c *corev1.Container, file string) (Source, error) {
	if !path.IsAbs(file) || strings.ContainsAny(file, "$`") {
		return Source{}, fmt.Errorf("%w: %q is not an absolute path the template names", ErrNotReadable, file)
	}
	file = path.Clean(file)
	m, ok := podpath.MountOf(c, file)
	if !ok {
		return Source{}, fmt.Errorf("%w: %s is on no volume mounted in the etcd container (it comes with the image)", ErrNotReadable, file)
	}
	inVolume := podpath.InVolume(m, file)
	for _, v := range spec.Volumes {
		if v.Name != m.Name {
			continue
		}
		switch {
		case v.ConfigMap != nil:
			return keyOf(ConfigMap, v.ConfigMap.Name, v.ConfigMap.Items, inVolume)
		case v.Secret != nil:
			return keyOf(Secret, v.Secret.SecretName, v.Secret.Items, inVolume)
		}
		return Source{}, fmt.Errorf("%w: %s is on volume %q, which is neither a ConfigMap nor a Secret", ErrNotReadable, file, v.Name)
	}
	return Source{}, fmt.Errorf("%w: %s is on volume %q, which the pod does not define", ErrNotReadable, file, m.Name)
}

// keyOf is the key of a ConfigMap or Secret volume that appears at inVolume: the item mapped there, or,
// without items, the key of that name.
func keyOf(kind Kind, name string, items []corev1.KeyToPath, inVolume string) (Source, error) {
	if len(items) == 0 {
		if inVolume == "" || strings.Contains(inVolume, "/") {
			return Source{}, fmt.Errorf("%w: %s %s has no key at %q", ErrNotReadable, kind, name, inVolume)
		}
		return Source{Kind: kind, Name: name, Key: inVolume}, nil
	}
	for _, it := range items {
		if path.Clean(it.Path) == inVolume {
			return Source{Kind: kind, Name: name, Key: it.Key}, nil
		}
	}
	return Source{}, fmt.Errorf("%w: no item of %s %s is mounted at %q", ErrNotReadable, kind, name, inVolume)
}

// Parse reads the settings from the file's content as etcd does (YAML, its own key names; other keys are
// ignored). The error never quotes the content: the file may sit in a Secret next to values that must not
// reach a log.
func Parse(content []byte) (Settings, error) {
	var s Settings
	if err := yaml.Unmarshal(content, &s); err != nil {
		return Settings{}, errors.New("its content is not a YAML map with string values for name, data-dir and wal-dir")
	}
	return s, nil
}

// Reader reads configuration files from the API.
type Reader struct {
	kube      kubernetes.Interface
	namespace string
	// retry runs one API call again while the API server is briefly away (the engine's withAPIRetry).
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

// Read locates file in the pod spec and reads its settings.
func (r *Reader) Read(ctx context.Context, spec *corev1.PodSpec, c *corev1.Container, file string) (Settings, error) {
	src, err := Locate(spec, c, file)
	if err != nil {
		return Settings{}, err
	}
	content, err := r.content(ctx, src)
	if err != nil {
		return Settings{}, err
	}
	s, err := Parse(content)
	if err != nil {
		return Settings{}, fmt.Errorf("%s, mounted at %s: %w", src, file, err)
	}
	return s, nil
}

// content is the bytes of src's key.
func (r *Reader) content(ctx context.Context, src Source) ([]byte, error) {
	var data map[string][]byte
	err := r.retry(ctx, func(ctx context.Context) error {
		switch src.Kind {
		case Secret:
			s, err := r.kube.CoreV1().Secrets(r.namespace).Get(ctx, src.Name, metav1.GetOptions{})
			if err == nil {
				data = s.Data
			}
			return err
		default:
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
		}
	})
	if err != nil {
		return nil, fmt.Errorf("reading %s/%s: %w", r.namespace, src, err)
	}
	b, ok := data[src.Key]
	if !ok {
		return nil, fmt.Errorf("%s/%s has no such key", r.namespace, src)
	}
	return b, nil
}

// Memo reads each file once: one look at a cluster, whose template and pods usually mount the same
// ConfigMap, reads it once. It is safe for concurrent use; a new look takes a new Memo, so a changed file is
// read again.
type Memo struct {
	r    *Reader
	mu   sync.Mutex
	read map[Source]memoEntry
}

type memoEntry struct {
	settings Settings
	err      error
}

// Memo starts a look that reads each file once.
func (r *Reader) Memo() *Memo { return &Memo{r: r, read: map[Source]memoEntry{}} }

// Read is Reader.Read, once per file in this look.
func (m *Memo) Read(ctx context.Context, spec *corev1.PodSpec, c *corev1.Container, file string) (Settings, error) {
	src, err := Locate(spec, c, file)
	if err != nil {
		return Settings{}, err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if e, ok := m.read[src]; ok {
		return e.settings, e.err
	}
	s, err := m.r.Read(ctx, spec, c, file)
	m.read[src] = memoEntry{s, err}
	return s, err
}
