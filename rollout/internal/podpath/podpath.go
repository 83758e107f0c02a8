// Package podpath answers where a path a container names lives: which of its volume mounts holds it. The
// durability classification (where etcd's data dir is) and the configuration file reader (where etcd's
// --config-file is) both ask it, as the kubelet resolves mounts: the longest mount path that contains the path.
package podpath

import (
	"path"
	"strings"

	corev1 "k8s.io/api/core/v1"
)

// MountOf is c's volume mount that holds the absolute path p, and whether one does.
func MountOf(c *corev1.Container, p string) (corev1.VolumeMount, bool) {
	var best corev1.VolumeMount
	found := false
	if c == nil {
		return best, false
	}
	p = path.Clean(p)
	for _, m := range c.VolumeMounts {
		mp := path.Clean(m.MountPath)
		if (p == mp || strings.HasPrefix(p, strings.TrimSuffix(mp, "/")+"/")) && (!found || len(mp) > len(path.Clean(best.MountPath))) {
			best, found = m, true
		}
	}
	return best, found
}

// InVolume is where p is inside the volume that mount m holds: relative to the mount path, under the mount's
// subPath. "" is the volume's root.
func InVolume(m corev1.VolumeMount, p string) string {
	rel := strings.TrimPrefix(strings.TrimPrefix(path.Clean(p), path.Clean(m.MountPath)), "/")
	if m.SubPath != "" {
		rel = strings.TrimSuffix(path.Join(m.SubPath, rel), "/")
	}
	return rel
}
