package memberapi

import (
	"fmt"
	"strconv"
	"time"
)

// ParseSeconds reads the value of a delay annotation: a non-negative decimal number of seconds ("3",
// "0.5"); "" is zero. Seconds, not Go durations, because people write these annotations in YAML next to
// terminationGracePeriodSeconds.
func ParseSeconds(value string) (time.Duration, error) {
	if value == "" {
		return 0, nil
	}
	f, err := strconv.ParseFloat(value, 64)
	if err != nil || !(f >= 0 && f <= 24*3600) { // the negation also refuses NaN
		return 0, fmt.Errorf("%q: want a number of seconds between 0 and 86400", value)
	}
	return time.Duration(f * float64(time.Second)).Round(time.Millisecond), nil
}

// FormatSeconds is the annotation value of d (ParseSeconds reads it back to the millisecond).
func FormatSeconds(d time.Duration) string {
	return strconv.FormatFloat(d.Round(time.Millisecond).Seconds(), 'f', -1, 64)
}
