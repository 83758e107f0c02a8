package planner

import (
	"fmt"
	"regexp"
	"strconv"
	"strings"
)

// EtcdVersion is a release's major.minor.patch.
type EtcdVersion struct{ Major, Minor, Patch int }

func (v EtcdVersion) String() string { return fmt.Sprintf("%d.%d.%d", v.Major, v.Minor, v.Patch) }

// imageTag matches the version at the start of an image tag: registry.k8s.io/etcd:3.6.8-0,
// quay.io/coreos/etcd:v3.5.21, gcr.io/etcd-development/etcd:v3.6.0-rc.1.
var imageTag = regexp.MustCompile(`:v?(\d+)\.(\d+)\.(\d+)[^:/]*$`)

// ImageVersion reads the etcd version from an image reference's tag. A tag pinned by digest as well
// (etcd:v3.6.8@sha256:…) is read before the digest, which says nothing of the version; an image pinned only
// by digest, or tagged otherwise ("latest"), has no version to read.
func ImageVersion(image string) (EtcdVersion, bool) {
	if at := strings.IndexByte(image, '@'); at >= 0 {
		image = image[:at]
	}
	m := imageTag.FindStringSubmatch(image)
	if m == nil {
		return EtcdVersion{}, false
	}
	n := func(s string) int { i, _ := strconv.Atoi(s); return i }
	return EtcdVersion{n(m[1]), n(m[2]), n(m[3])}, true
}

// ParseVersion reads "3.6.8" (or "v3.6.8", "3.6.0-rc.1") as etcd reports it.
func ParseVersion(s string) (EtcdVersion, bool) {
	return ImageVersion(":" + strings.TrimSpace(s))
}

func (v EtcdVersion) Less(w EtcdVersion) bool {
	if v.Major != w.Major {
		return v.Major < w.Major
	}
	if v.Minor != w.Minor {
		return v.Minor < w.Minor
	}
	return v.Patch < w.Patch
}

// minor is "3.6" of 3.6.8.
func (v EtcdVersion) MajorMinor() string { return fmt.Sprintf("%d.%d", v.Major, v.Minor) }
