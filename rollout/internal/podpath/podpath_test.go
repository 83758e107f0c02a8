package podpath

import (
	"testing"

	"github.com/stretchr/testify/assert"
	corev1 "k8s.io/api/core/v1"
)

func TestMountOfAndInVolume(t *testing.T) {
	c := &corev1.Container{VolumeMounts: []corev1.VolumeMount{
		{Name: "root", MountPath: "/var"},
		{Name: "data", MountPath: "/var/lib/etcd/"},
		{Name: "conf", MountPath: "/etc/etcd/etcd.yaml", SubPath: "conf/etcd.yaml"},
	}}
	tests := []struct {
		name, path, wantMount, wantInVolume string
	}{
		{"the longest mount path wins", "/var/lib/etcd/member", "data", "member"},
		{"the mount path itself", "/var/lib/etcd", "data", ""},
		{"a shorter mount holds what the longer does not", "/var/lib/etc", "root", "lib/etc"},
		{"a single file mounted with subPath", "/etc/etcd/etcd.yaml", "conf", "conf/etcd.yaml"},
		{"on no mount", "/srv/etcd", "", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m, ok := MountOf(c, tt.path)
			assert.Equal(t, tt.wantMount != "", ok)
			assert.Equal(t, tt.wantMount, m.Name)
			if ok {
				assert.Equal(t, tt.wantInVolume, InVolume(m, tt.path))
			}
		})
	}
	_, ok := MountOf(nil, "/var")
	assert.False(t, ok, "no container, no mount")
}
