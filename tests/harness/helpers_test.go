package harness_test

import (
	"slices"

	corev1 "k8s.io/api/core/v1"
)

func contains(list []string, s string) bool { return slices.Contains(list, s) }

func volumeMount(name, path string) corev1.VolumeMount {
	return corev1.VolumeMount{Name: name, MountPath: path, ReadOnly: true}
}
