package memberapi

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
)

// ParseOrdinals reads the value of AnnotationFaultOrdinals: pod ordinals separated by commas ("0", "0,2",
// spaces allowed). "" is nil: no restriction. A value that names no ordinal, or anything but non-negative
// integers, is an error, so a typo never silently puts a fault on every member.
func ParseOrdinals(value string) ([]int, error) {
	if strings.TrimSpace(value) == "" {
		return nil, nil
	}
	var out []int
	for _, part := range strings.Split(value, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(part))
		if err != nil || n < 0 {
			return nil, fmt.Errorf("%q: want pod ordinals separated by commas, such as \"0\" or \"0,2\"", value)
		}
		if !slices.Contains(out, n) {
			out = append(out, n)
		}
	}
	slices.Sort(out)
	return out, nil
}

// FormatOrdinals is the annotation value of ordinals (sorted, without repeats); ParseOrdinals reads it back.
func FormatOrdinals(ordinals []int) string {
	sorted := slices.Clone(ordinals)
	slices.Sort(sorted)
	sorted = slices.Compact(sorted)
	parts := make([]string, len(sorted))
	for i, n := range sorted {
		parts[i] = strconv.Itoa(n)
	}
	return strings.Join(parts, ",")
}
