// Package configfile reads the settings etcd takes from its configuration file (--config-file or
// ETCD_CONFIG_FILE) when the file is mounted from a ConfigMap or a Secret. With a configuration file etcd
// ignores every other flag and ETCD_* variable, so the data dir and the WAL dir (and the member name that the
// default data dir is made of) are known only from the file: the durability classification needs them before
// the engine decides whether a member is restarted or replaced (issue 32; ../shared/notes/shapes.md §1.5).
package configfile

import (
	"context"
	"errors"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/yaml"

	"github.com/etcd-rollout/pulumi-etcd-rollout/rollout/internal/podfile"
)

// Settings are the entries of etcd's configuration file that say where it keeps its data, under the names
// etcd gives them in the file.
type Settings struct {
	Name    string `json:"name"`
	DataDir string `json:"data-dir"`
	WALDir  string `json:"wal-dir"`
	// InitialClusterState is "new" or "existing"; "" when the file does not say, and etcd starts as "new".
	InitialClusterState string `json:"initial-cluster-state"`
}

// Parse reads the settings from the file's content as etcd does (YAML, its own key names; other keys are
// ignored). The error never quotes the content: the file may sit in a Secret next to values that must not
// reach a log.
func Parse(content []byte) (Settings, error) {
	var s Settings
	if err := yaml.Unmarshal(content, &s); err != nil {
		return Settings{}, errors.New("its content is not a YAML map with string values for name, data-dir, wal-dir and initial-cluster-state")
	}
	return s, nil
}

// Read reads the settings of the configuration file container c of spec sees at file, through files.
func Read(ctx context.Context, files *podfile.Memo, spec *corev1.PodSpec, c *corev1.Container, file string) (Settings, error) {
	content, src, err := files.Read(ctx, spec, c, file)
	if err != nil {
		return Settings{}, err
	}
	s, err := Parse(content)
	if err != nil {
		return Settings{}, fmt.Errorf("%s, mounted at %s: %w", src, file, err)
	}
	return s, nil
}
