package rollout

import (
	"strconv"
	"strings"
	"time"
)

// The engine's small shared helpers, in one leaf file that depends on nothing else of the package.

// memberCallTimeout bounds each etcd call made while observing, so a member that is down costs seconds,
// not the caller's whole deadline.
const memberCallTimeout = 3 * time.Second

// podName is the pod of a StatefulSet's member by its ordinal.
func podName(sts string, ordinal int) string { return sts + "-" + strconv.Itoa(ordinal) }

// ordinalOf reads the ordinal from a member pod's name.
func ordinalOf(sts, pod string) (int, bool) {
	rest, ok := strings.CutPrefix(pod, sts+"-")
	if !ok {
		return 0, false
	}
	n, err := strconv.Atoi(rest)
	return n, err == nil && n >= 0
}
