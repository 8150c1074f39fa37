package leasehold

import (
	"math/rand/v2"
	"time"
)

// backoff returns a delay for the given attempt (1-based): exponential from
// min, capped at max, with full jitter over the upper half so that the delay
// never drops below half the exponential step (retries spread out without
// collapsing to zero).
func backoff(attempt int, min, max time.Duration) time.Duration {
	if min <= 0 {
		min = time.Millisecond
	}
	if max < min {
		max = min
	}
	d := min
	for i := 1; i < attempt && d < max; i++ {
		d *= 2
	}
	if d > max {
		d = max
	}
	half := d / 2
	return half + rand.N(d-half+1)
}
