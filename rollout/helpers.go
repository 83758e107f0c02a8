package rollout

import (
	"fmt"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"
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

// Truncate cuts s to at most n bytes, on a rune boundary so that no character is split, and marks the cut
// with an ellipsis: what the engine and the provider publish (Events, the status ConfigMap, Pulumi state)
// stays bounded and valid UTF-8.
func Truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n] + "…"
}

func plural(n int, one, many string) string {
	if n == 1 {
		return "1 " + one
	}
	return fmt.Sprintf("%d %s", n, many)
}
