package planner

import (
	"fmt"
	"strconv"
	"strings"
	"unicode/utf8"
)

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

// Plural is n with the word for one or for many: "1 member", "3 members".
func Plural(n int, one, many string) string {
	if n == 1 {
		return "1 " + one
	}
	return fmt.Sprintf("%d %s", n, many)
}

// PodName is the pod of a StatefulSet's member by its ordinal.
func PodName(sts string, ordinal int) string { return sts + "-" + strconv.Itoa(ordinal) }

// OrdinalOf reads the ordinal from a member pod's name.
func OrdinalOf(sts, pod string) (int, bool) {
	rest, ok := strings.CutPrefix(pod, sts+"-")
	if !ok {
		return 0, false
	}
	n, err := strconv.Atoi(rest)
	return n, err == nil && n >= 0
}
