// Package retry holds the waits between attempts: Delay, exponential from a
// minimum, capped at a maximum, with jitter, and Sleep, which ends early with
// its context.
package retry

import (
	"context"
	"math/rand/v2"
	"time"
)

// Delay returns a delay for the given attempt (1-based): exponential from
// minimum, capped at maximum, with full jitter over the upper half so that
// the delay never drops below half the exponential step (retries spread out
// without collapsing to zero). A minimum of zero or less counts as 1ms, a
// maximum below the minimum as the minimum.
func Delay(attempt int, minimum, maximum time.Duration) time.Duration {
	if minimum <= 0 {
		minimum = time.Millisecond
	}
	if maximum < minimum {
		maximum = minimum
	}
	d := minimum
	for i := 1; i < attempt && d < maximum; i++ {
		d *= 2
	}
	if d > maximum {
		d = maximum
	}
	half := d / 2
	return half + rand.N(d-half+1)
}

// Sleep sleeps for d or until ctx is done; it reports whether it slept the
// whole time.
func Sleep(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}
