package leasing

import (
	"fmt"
	"time"
)

// sentinel is an error that reads as its own sentence and matches its
// parent with errors.Is, so that a sentinel of a higher layer can narrow one
// of a lower layer without repeating its text.
type sentinel struct {
	msg    string
	parent error
}

func (e *sentinel) Error() string { return e.msg }
func (e *sentinel) Unwrap() error { return e.parent }

// NewSentinel returns an error that reads as msg and matches parent (and
// what parent matches) with errors.Is.
func NewSentinel(msg string, parent error) error { return &sentinel{msg: msg, parent: parent} }

// lostError is a cause of loss: it reads as itself and matches [ErrLost].
// Its type names the loss in telemetry (error.type "*leasing.lostError").
type lostError struct{ msg string }

func (e *lostError) Error() string { return e.msg }
func (e *lostError) Unwrap() error { return ErrLost }

var (
	// ErrHeld is returned by [Manager.Acquire] when another owner holds the
	// lease. The error is a [*HeldError] that carries the holder and the time
	// left.
	ErrHeld = NewError("lease: held by another owner", ClassRetry)

	// ErrLost means the caller no longer holds the lease. [ErrStolen],
	// [ErrExpired] and [ErrRenewDeadline] all match it with errors.Is. It is
	// the one such sentinel of the module: lease.ErrLost,
	// idempotency.ErrLeaseLost and leasehold.ErrLeaseLost are this error.
	ErrLost = NewError("lease: lost", ClassLeaseLost)

	// ErrStolen means a renewal, release or fenced write found another owner (a
	// different token or fence) on the lease key.
	ErrStolen error = &lostError{"lease: stolen"}

	// ErrExpired means a renewal, release or fenced write found no owner on the
	// lease key: it expired in Redis before it could be renewed.
	ErrExpired error = &lostError{"lease: expired"}

	// ErrRenewDeadline means renewals kept failing (Redis unreachable, slow or
	// paused) until the lease's local deadline passed, so the holder gave the
	// lease up without hearing from Redis.
	ErrRenewDeadline error = &lostError{"lease: renewals failed until the local deadline"}

	// ErrReleased is the cause of a lease ended by [Lease.Release], or by
	// [Forget] after the holder's own script deleted it.
	ErrReleased = NewError("lease: released", ClassLeaseLost)

	// ErrUnavailable wraps failures to reach Redis (network errors, timeouts,
	// OOM, LOADING, READONLY, CLUSTERDOWN and similar transient replies). It
	// is the one such sentinel of the module: lease.ErrUnavailable,
	// idempotency.ErrUnavailable, compensation.ErrUnavailable and
	// leasehold.ErrUnavailable are this error.
	ErrUnavailable = NewError("leasehold: redis unavailable", ClassOutage)

	// ErrClosed is returned by a Manager after Shutdown, and is the cause of
	// the leases that Shutdown ended.
	ErrClosed = NewError("lease: manager closed", ClassOutage)

	// ErrNotStarted is returned by Acquire and Adopt before [Manager.Start]:
	// without the renewer, a lease would silently run out.
	ErrNotStarted = NewError("lease: manager not started", ClassOutage)

	// ErrInvalid reports a bad argument: an empty or oversized name, a Grant
	// missing a field, a non-positive TTL.
	ErrInvalid = NewError("lease: invalid argument", ClassTerminal)

	// ErrEvictionPolicy is returned by Start when Redis may evict keys
	// (maxmemory-policy allkeys-* or volatile-*): an evicted lease key lets a
	// second owner in.
	ErrEvictionPolicy = NewError("lease: redis maxmemory-policy evicts keys", ClassTerminal)
)

// HeldError is the detail of [ErrHeld].
type HeldError struct {
	// Name is the lease name.
	Name string
	// Token is the holder's owner token.
	Token string
	// Remaining is the time the lease has left in Redis unless renewed.
	Remaining time.Duration
}

// Error does not include the holder's token, so that it can be logged.
func (e *HeldError) Error() string {
	return fmt.Sprintf("lease: %q held by another owner for %s more", e.Name, e.Remaining)
}

// Unwrap returns [ErrHeld].
func (e *HeldError) Unwrap() error { return ErrHeld }
