package leasehold

import (
	"time"

	"github.com/leasehold/leasehold/internal/retry"
)

// backoff returns the retry delay of the given attempt (1-based): see
// retry.Delay, which the dead-letter writer shares.
func backoff(attempt int, min, max time.Duration) time.Duration {
	return retry.Delay(attempt, min, max)
}
