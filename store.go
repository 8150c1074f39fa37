package leasehold

import (
	"context"
	"time"

	"go.opentelemetry.io/otel/trace"

	"github.com/leasehold/leasehold/lease"
)

// claimRequest asks for the idempotency key of one record.
type claimRequest struct {
	Key     string
	Type    string
	Payload []byte        // fingerprinted by the store
	TTL     time.Duration // the job type's lease TTL (WithJobLeaseTTL); zero: the worker's
	// Worker and Span go into the history entry of the attempt the claim
	// starts: the worker's identity and the attempt's span.
	Worker string
	Span   trace.SpanContext
}

// claim is the store's answer for one key. For OutcomeAcquired and
// OutcomeTakeover it carries the running attempt's handle.
type claim struct {
	Outcome   Outcome
	Fence     uint64
	PrevFence uint64        // for OutcomeTakeover: the fence taken over
	Cancelled bool          // an operator cancelled the previous attempt, which ended first: do not run (idempotency.Claim.Cancelled)
	Attempt   int           // 1 for the first run of the key
	LastBeat  []byte        // details stored by the previous attempt
	Result    []byte        // cached result for OutcomeDuplicate
	Failure   string        // cached terminal failure for OutcomeDuplicate
	Remaining time.Duration // for OutcomeHeld: the holder's lease time left, when known
	Err       error         // a per-key failure (the key could not be claimed)

	run attempt // for running outcomes: the attempt's fenced writes; nil otherwise
}

// store is the seam between the Kafka side and Redis: the worker's
// dispatcher claims through it and every running attempt writes through the
// attempt handle its claim carries. It is implemented over
// idempotency.Store (store_redis.go) and, in tests, by a fake. Errors that
// mean "Redis cannot be reached" match ErrUnavailable and errors that mean
// "no longer the owner" match ErrLeaseLost.
type store interface {
	// ClaimBatch claims every request in one round trip where it can; the
	// answer is in request order. An error applies to the whole batch.
	ClaimBatch(ctx context.Context, reqs []claimRequest) ([]claim, error)
	// Ping reports whether Redis answers.
	Ping(ctx context.Context) error
}

// attempt is one running attempt at a key: its lease-bound context and its
// writes, each fenced by the attempt's lease.
type attempt interface {
	// Context is cancelled, with a cause matching ErrLeaseLost, when the
	// lease is lost.
	Context() context.Context
	// TTL is the lease's time to live.
	TTL() time.Duration
	// Lease is the attempt's lease, which saga journals are bound to; nil
	// when the store has none (tests).
	Lease() *lease.Lease
	// Complete records the result, fenced: ErrLeaseLost if not the owner.
	Complete(ctx context.Context, result []byte) error
	// Fail records a failure: terminal caches it like a result, otherwise
	// the lease is released so that the next claim proceeds.
	Fail(ctx context.Context, cause error, terminal bool) error
	// SaveDetails stores heartbeat details under the lease, fenced.
	SaveDetails(ctx context.Context, details []byte) error
	// Committed reports whether the attempt's commit landed: the key's
	// record is COMPLETED under its fence. It settles a commit whose answer
	// was lost.
	Committed(ctx context.Context) (bool, error)
	// Abandon gives the lease up without recording anything (the next
	// claim takes over); it does nothing once the lease is lost.
	Abandon()
}
