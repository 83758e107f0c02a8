package harness

import (
	"fmt"
	"slices"
	"strings"
)

// imageTags are the versions a member can run, by the value of the version annotation, with the
// registry.k8s.io/etcd tag of the binary tools/build.sh builds for each (the member daemon runs that binary;
// the image names it for people and for the engine's diff). "3.5" and "3.6" are the pinned releases of each
// minor; 3.5.21 is below 3.5.32, the oldest 3.5 etcd supports upgrading to 3.6 from, so a test can show the
// engine refusing that upgrade from what the members themselves report.
var imageTags = map[string]string{"3.6": "3.6.8-0", "3.5": "3.5.35-0", "3.5.21": "3.5.21-0"}

// checkVersion refuses a version no member can run, before a template carries it and its pods never start.
func checkVersion(version string) error {
	if _, ok := imageTags[version]; ok {
		return nil
	}
	known := make([]string, 0, len(imageTags))
	for v := range imageTags {
		known = append(known, v)
	}
	slices.Sort(known)
	return fmt.Errorf("version %q: want one of %s", version, strings.Join(known, ", "))
}

// etcdImage is the etcd container's image for version, as the manifest names it.
func etcdImage(version string) string { return "registry.k8s.io/etcd:" + imageTags[version] }
