// Package resulterr holds the worker's refusal to commit a result over the
// idempotency store's bound, shared by the worker and leaseholdtest so that a
// handler's unit test sees the error a worker gives.
package resulterr

import (
	"fmt"

	"github.com/leasehold/leasehold/idempotency"
	"github.com/leasehold/leasehold/internal/leasing"
)

// ErrTooLarge is leasehold.ErrResultTooLarge.
var ErrTooLarge = leasing.NewError("leasehold: result too large", leasing.ClassTerminal)

// Error is the user-facing form of an idempotency.TooLargeError met by a
// commit: one sentence with the fix. It matches [ErrTooLarge] and unwraps to
// the store's error.
type Error struct{ Err *idempotency.TooLargeError }

func (e *Error) Error() string {
	return fmt.Sprintf("leasehold: the handler returned a result of %d bytes, over the %d-byte limit; "+
		"return a smaller result (a reference to data stored elsewhere) or raise the limit with "+
		"WithIdempotencyOptions(idempotency.WithMaxResult(n))", e.Err.Size, e.Err.Limit)
}

// Unwrap returns the store's error.
func (e *Error) Unwrap() error { return e.Err }

// Is matches [ErrTooLarge].
func (e *Error) Is(target error) bool { return target == ErrTooLarge }
