package provider

import (
	"math"
	"time"
)

// maxSeconds is the largest number of seconds a time.Duration holds (about 292 years). A larger value would
// wrap around when the engine's Config is made from it: a cool-down could come out as some other positive
// duration, a timeout as a negative one that the engine refuses only once `pulumi up` runs.
const maxSeconds = math.MaxInt64 / int64(time.Second)

func tooManySeconds(n int) bool { return int64(n) > maxSeconds }
