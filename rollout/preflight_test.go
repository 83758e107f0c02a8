package rollout

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestImageVersion(t *testing.T) {
	tests := []struct {
		image string
		want  EtcdVersion
		ok    bool
	}{
		{"registry.k8s.io/etcd:3.6.8-0", EtcdVersion{3, 6, 8}, true},
		{"quay.io/coreos/etcd:v3.5.21", EtcdVersion{3, 5, 21}, true},
		{"gcr.io/etcd-development/etcd:v3.6.0-rc.1", EtcdVersion{3, 6, 0}, true},
		{"localhost:5000/etcd:3.5.26", EtcdVersion{3, 5, 26}, true},
		{"localhost:5000/etcd", EtcdVersion{}, false},
		{"quay.io/coreos/etcd:latest", EtcdVersion{}, false},
		{"registry.k8s.io/etcd@sha256:0123abcd", EtcdVersion{}, false},
	}
	for _, tt := range tests {
		t.Run(tt.image, func(t *testing.T) {
			got, ok := ImageVersion(tt.image)
			require.Equal(t, tt.ok, ok)
			assert.Equal(t, tt.want, got)
		})
	}
}

func TestCheckVersionPath(t *testing.T) {
	v := func(minor, patch int) EtcdVersion { return EtcdVersion{3, minor, patch} }
	tests := []struct {
		name     string
		from, to EtcdVersion
		want     string // part of the error; empty: allowed
	}{
		{name: "same version", from: v(6, 8), to: v(6, 8)},
		{name: "patch upgrade", from: v(5, 21), to: v(5, 26)},
		{name: "patch downgrade", from: v(6, 8), to: v(6, 5)},
		{name: "3.5 from the minimum patch", from: v(5, MinPatchBefore36), to: v(6, 0)},
		{name: "3.6 to 3.7", from: v(6, 8), to: v(7, 0)},
		{name: "3.5.26, the floor before etcd's July 2026 guide", from: v(5, 26), to: v(6, 8), want: "only from 3.5.32 or later"},
		{name: "3.5 too old for 3.6", from: v(5, 21), to: v(6, 8), want: "etcd 3.5.21 -> 3.6.8: etcd supports upgrading to 3.6 only from 3.5.32 or later"},
		{name: "skipping a minor", from: v(4, 30), to: v(6, 8), want: "skips a minor version"},
		{name: "minor downgrade from 3.6, through etcd's downgrade API", from: v(6, 8), to: v(5, 26)},
		{name: "minor downgrade from before 3.6", from: v(5, 35), to: v(4, 30), want: "is a downgrade from before 3.6"},
		{name: "two minors down", from: v(7, 0), to: v(5, 35), want: "goes down more than one minor version"},
		{name: "major change", from: v(6, 8), to: EtcdVersion{4, 0, 0}, want: "changes the major version"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := CheckVersionPath(tt.from, tt.to)
			if tt.want == "" {
				assert.NoError(t, err)
				return
			}
			require.Error(t, err)
			assert.Contains(t, err.Error(), tt.want)
		})
	}
}
