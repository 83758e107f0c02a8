package members

import (
	"fmt"
	"regexp"

	"github.com/etcd-rollout/pulumi-etcd-rollout/tests/harness/memberapi"
)

// release is an exact etcd release, such as 3.5.21.
var release = regexp.MustCompile(`^\d+\.\d+\.\d+$`)

// etcdBinary maps a pod's version annotation to the version the member runs and the file in the bin dir that
// runs it: "" and "3.6" run etcd (the pinned 3.6), "3.5" runs etcd-v3.5 (the pinned 3.5), and an exact
// release X.Y.Z runs etcd-vX.Y.Z. The last is a naming rule, not a list: the file is looked up when the member
// starts, so a release that tools/build.sh begins to build needs no new daemon. A new daemon means a restart,
// and a restart stops every member of every cluster on the machine, failing whatever tests run at that time.
func etcdBinary(version string) (string, string, error) {
	switch {
	case version == "" || version == "3.6":
		return "3.6", "etcd", nil
	case version == "3.5":
		return version, "etcd-v3.5", nil
	case release.MatchString(version):
		return version, "etcd-v" + version, nil
	}
	return "", "", fmt.Errorf("annotation %s=%q: want 3.5, 3.6 or a release such as 3.5.21", memberapi.AnnotationVersion, version)
}
