// Package retry holds the waits between attempts: Delay, the module's one
// backoff (exponential from a minimum, capped at a maximum, with jitter),
// which the worker, the dead-letter writer and the compensation runner use,
// and Sleep, which ends early with its context.
package retry

import (
	"context"
	"math/rand/v2"
	"time"
)

// Delay returns the delay before retry number attempt (1-based). Its step
// doubles from minimum with each attempt, capped at maximum: minimum,
// 2·minimum, 4·minimum, ..., maximum. The delay is drawn uniformly between
// half the step and the whole step ("equal jitter", not full jitter, which
// would draw from zero), so retries of many callers spread out, yet never
// come sooner than half the step, nor later than maximum. A minimum of zero
// or less counts as 1ms, a maximum below the minimum as the minimum, an
// attempt below 1 as 1.
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
