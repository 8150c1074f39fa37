package lease

import "github.com/leasehold/leasehold/internal/leasing"

// The errors of the package. They are the errors of the leasing
// implementation, so errors.Is matches them in every package of the module:
// idempotency.ErrLeaseLost and leasehold.ErrLeaseLost are [ErrLost];
// idempotency.ErrUnavailable, compensation.ErrUnavailable and
// leasehold.ErrUnavailable are [ErrUnavailable].
var (
	// ErrHeld is returned by [Manager.Acquire] when another owner holds the
	// lease. The error is a [*HeldError] that carries the holder and the time
	// left.
	ErrHeld = leasing.ErrHeld

	// ErrLost means the caller no longer holds the lease. [ErrStolen],
	// [ErrExpired] and [ErrRenewDeadline] all match it with errors.Is.
	ErrLost = leasing.ErrLost

	// ErrStolen means a renewal, release or fenced write found another owner (a
	// different token or fence) on the lease key.
	ErrStolen = leasing.ErrStolen

	// ErrExpired means a renewal, release or fenced write found no owner on the
	// lease key: it expired in Redis before it could be renewed.
	ErrExpired = leasing.ErrExpired

	// ErrRenewDeadline means renewals kept failing (Redis unreachable, slow or
	// paused) until the lease's local deadline passed, so the holder gave the
	// lease up without hearing from Redis.
	ErrRenewDeadline = leasing.ErrRenewDeadline

	// ErrReleased is the cause of a lease ended by [Lease.Release].
	ErrReleased = leasing.ErrReleased

	// ErrUnavailable wraps failures to reach Redis (network errors, timeouts,
	// OOM, LOADING, READONLY, CLUSTERDOWN and similar transient replies).
	ErrUnavailable = leasing.ErrUnavailable

	// ErrClosed is returned by a Manager after Shutdown, and is the cause of
	// the leases that Shutdown ended.
	ErrClosed = leasing.ErrClosed

	// ErrNotStarted is returned by Acquire before [Manager.Start]: without the
	// renewer, a lease would silently run out.
	ErrNotStarted = leasing.ErrNotStarted

	// ErrInvalid reports a bad argument: an empty or oversized name or a
	// non-positive TTL.
	ErrInvalid = leasing.ErrInvalid

	// ErrEvictionPolicy is returned by Start when Redis may evict keys
	// (maxmemory-policy allkeys-* or volatile-*): an evicted lease key lets a
	// second owner in.
	ErrEvictionPolicy = leasing.ErrEvictionPolicy
)

// HeldError is the detail of [ErrHeld].
type HeldError = leasing.HeldError
