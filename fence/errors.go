package fence

import (
	"errors"
	"fmt"

	"github.com/leasehold/leasehold/internal/leasing"
)

// ErrStaleFence is returned by [Apply] when a newer fence has already been
// recorded for the resource. The caller must roll back its transaction.
//
// A newer fence means a newer owner: the caller's lease is gone. So
// ErrStaleFence matches lease.ErrLost (and leasehold.ErrLeaseLost) with
// errors.Is, and a handler that returns it, bare or wrapped, is settled as a
// lost lease (its saga steps compensated, the job not retried as a failure),
// without wrapping it itself.
var ErrStaleFence = leasing.NewSentinel("fence: stale fence", leasing.ErrLost)

// ErrInvalidFence is returned by [Apply] for fence 0 or a fence beyond the
// range of a PostgreSQL bigint. Leases hand out fences from 1 upwards.
var ErrInvalidFence = errors.New("fence: invalid fence")

// ErrInvalidResource is returned by [Apply] for an empty resource name or one
// longer than [MaxResourceLen] bytes.
var ErrInvalidResource = errors.New("fence: invalid resource")

// StaleError is the detail of [ErrStaleFence]: the resource, the fence the
// caller offered and the newer fence already recorded.
type StaleError struct {
	Resource string
	Fence    uint64
	Current  uint64
}

// Error implements error.
func (e *StaleError) Error() string {
	return fmt.Sprintf("fence: stale fence %d for %q (newest is %d)", e.Fence, e.Resource, e.Current)
}

// Unwrap returns [ErrStaleFence].
func (e *StaleError) Unwrap() error { return ErrStaleFence }
