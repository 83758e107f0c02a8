package planner

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
		{"registry.k8s.io/etcd:3.6.8-0@sha256:0123abcd", EtcdVersion{3, 6, 8}, true},
		{"localhost:5000/etcd:v3.5.35@sha256:0123abcd", EtcdVersion{3, 5, 35}, true},
		{"localhost:5000/etcd@sha256:0123abcd", EtcdVersion{}, false},
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

// A digest-pinned image is rolled like its tag says (review 3, item 5): before the fix its version was
// unknown, so a 3.5 → 3.6 roll planned no snapshot and skipped the 3.5.32 floor, and a template whose version
// nobody can tell is now refused when it replaces the members' image.
func TestADigestPinnedImageIsJudgedByItsTagAndAnUntoldVersionIsRefused(t *testing.T) {
	const (
		tag35  = "registry.k8s.io/etcd:3.5.35-0@sha256:35"
		tag36  = "registry.k8s.io/etcd:3.6.8-0@sha256:36"
		old35  = "registry.k8s.io/etcd:3.5.21-0@sha256:21"
		digest = "registry.k8s.io/etcd@sha256:ffff"
	)
	for _, tc := range []struct {
		name       string
		template   string
		images     []string
		versions   []string // Status answers; "" for a member that does not answer
		wantErr    error
		wantIn     string
		wantSnap   bool
		wantChecks bool // the v2 store and flag checks judged the target version
	}{
		{name: "tag@digest 3.5 → 3.6 plans a snapshot", template: tag36,
			images: []string{tag35, tag35, tag35}, versions: []string{"3.5.35", "3.5.35", "3.5.35"}, wantSnap: true, wantChecks: true},
		{name: "tag@digest below the 3.5.32 floor is refused", template: tag36,
			images: []string{old35, old35, old35}, versions: []string{"3.5.21", "3.5.21", "3.5.21"},
			wantErr: ErrVersionPath, wantIn: "only from 3.5.32 or later"},
		{name: "a digest-only template replacing the members' image is refused", template: digest,
			images: []string{tag35, tag35, tag35}, versions: []string{"3.5.35", "3.5.35", "3.5.35"},
			wantErr: ErrVersionUnknown, wantIn: "carries no version tag"},
		{name: "a digest-only template a member already runs is told by that member", template: digest,
			images: []string{digest, tag35, tag35}, versions: []string{"3.6.8", "3.5.35", "3.5.35"}, wantSnap: true, wantChecks: true},
		{name: "a member nobody can date while the others cross a minor is refused", template: tag36,
			images: []string{tag35, digest, tag35}, versions: []string{"3.5.35", "", "3.5.35"},
			wantErr: ErrVersionUnknown, wantIn: "etcd-1 does not answer"},
		{name: "a member nobody can date in a patch roll is not", template: tag36,
			images: []string{"registry.k8s.io/etcd:3.6.7-0", digest, "registry.k8s.io/etcd:3.6.7-0"}, versions: []string{"3.6.7", "", "3.6.7"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := healthyState(3, 1)
			s.TemplateImage, s.UpdateRevision = tc.template, newRev
			for i := range s.Members {
				s.Members[i].Image, s.Members[i].ServerVersion, s.Members[i].Revision = tc.images[i], tc.versions[i], oldRev
				s.Members[i].Healthy = tc.versions[i] != ""
			}
			s.Members[0].V2Enabled = tc.wantChecks
			err := CheckVersionPaths(s)
			if tc.wantErr != nil {
				require.ErrorIs(t, err, tc.wantErr)
				require.ErrorIs(t, err, ErrBlocked)
				assert.True(t, WaitingCannotFix(err), "waiting cannot tell a version")
				assert.Contains(t, err.Error(), tc.wantIn)
				return
			}
			if tc.wantChecks {
				require.ErrorIs(t, err, ErrVersionPath, "the v2 store check judged etcd 3.6")
				assert.Contains(t, err.Error(), "--enable-v2")
				s.Members[0].V2Enabled = false
				err = CheckVersionPaths(s)
			}
			require.NoError(t, err)
			if !tc.wantSnap {
				return
			}
			s.Members[0].Healthy, s.Members[1].Healthy, s.Members[2].Healthy = true, true, true
			move := versionMove(s, []int{0, 1, 2})
			require.NotNil(t, move, "the minor change is seen")
			assert.Equal(t, EtcdVersion{3, 6, 8}, move.To)
		})
	}
}

// A member whose pod is gone (deleted, not yet recreated) has no version to tell yet: the roll holds until the
// controller recreates the pod, which tells it, instead of refusing the roll as untold (the schedule
// checker's seeds 18226, 22728 and 24012 of the long mode).
func TestAMemberWithoutAPodHoldsTheVersionCheck(t *testing.T) {
	const digest = "registry.k8s.io/etcd@sha256:ffff"
	for _, tc := range []struct {
		name, template string
	}{
		{name: "while the others cross a minor", template: "registry.k8s.io/etcd:3.6.8-0@sha256:36"},
		{name: "under a template whose version its image does not tell", template: digest},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := healthyState(3, 1)
			s.TemplateImage, s.UpdateRevision = tc.template, newRev
			for i := range s.Members {
				s.Members[i].Image, s.Members[i].ServerVersion, s.Members[i].Revision = "registry.k8s.io/etcd:3.5.35-0", "3.5.35", oldRev
			}
			gone := &s.Members[0] // first in name order: judged before the others
			gone.PodExists, gone.Image, gone.ServerVersion, gone.Healthy = false, "", "", false
			err := CheckVersionPaths(s)
			require.ErrorIs(t, err, ErrBlocked)
			assert.NotErrorIs(t, err, ErrVersionPath)
			assert.False(t, WaitingCannotFix(err), "the recreated pod tells the version")
			assert.Contains(t, err.Error(), "etcd-0 has no pod")
		})
	}
}

// The provider's preview judges the template image against the members' images with CheckImagePath: a
// template whose version cannot be told is refused there too, unless every member already runs it.
func TestCheckImagePathRefusesATemplateVersionNobodyCanTell(t *testing.T) {
	const digest = "registry.k8s.io/etcd@sha256:ffff"
	err := CheckImagePath(digest, map[string]string{"etcd-0": "registry.k8s.io/etcd:3.5.35-0", "etcd-1": digest})
	require.ErrorIs(t, err, ErrVersionUnknown)
	assert.Contains(t, err.Error(), "rolling etcd-0 off registry.k8s.io/etcd:3.5.35-0")
	require.NoError(t, CheckImagePath(digest, map[string]string{"etcd-0": digest, "etcd-1": digest}))
	err = CheckImagePath("registry.k8s.io/etcd:3.6.8-0@sha256:36", map[string]string{"etcd-0": "registry.k8s.io/etcd:3.5.21-0"})
	require.Error(t, err, "tag@digest: the 3.5.32 floor is judged")
	assert.Contains(t, err.Error(), "only from 3.5.32 or later")
}
