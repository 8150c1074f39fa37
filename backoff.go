package leasehold

import (
	"time"

	"github.com/leasehold/leasehold/internal/retry"
)

// backoff returns the retry delay of the given attempt (1-based): the
// module's one backoff, retry.Delay, which the dead-letter writer and the
// compensation runner share (a step doubling from min up to max, each delay
// drawn between half the step and the whole step).
func backoff(attempt int, min, max time.Duration) time.Duration {
	return retry.Delay(attempt, min, max)
}
