package leasehold

import (
	"context"
	"time"

	"github.com/leasehold/leasehold/lease"
)

// claimRequest asks for the idempotency key of one record.
type claimRequest struct {
	Key     string
	Type    string
	Payload []byte        // fingerprinted by the store
	TTL     time.Duration // the job type's lease TTL (WithJobLeaseTTL); zero: the worker's
}

// claim is the store's answer for one key. For OutcomeAcquired and
// OutcomeTakeover it carries a live lease: Context is cancelled (with a cause
// matching ErrLeaseLost) when the lease is lost.
type claim struct {
	Outcome       Outcome
	Fence         uint64
	PrevFence     uint64        // for OutcomeTakeover: the fence taken over
	Attempt       int           // 1 for the first run of the key
	LastHeartbeat []byte        // details stored by the previous attempt
	Result        []byte        // cached result for OutcomeDuplicate
	Failure       string        // cached terminal failure for OutcomeDuplicate
	Remaining     time.Duration // for OutcomeHeld: the holder's lease time left, when known
	Err           error         // a per-key failure (the key could not be claimed)

	Context context.Context // lease-bound context for running outcomes
	Lease   *lease.Lease    // the key's lease for running outcomes
	ref     any             // the store's own handle
}

// store is the seam between the Kafka side and the idempotency records. It is
// implemented over idempotency.Store; errors that mean "Redis cannot be
// reached" wrap ErrUnavailable and errors that mean "no longer the owner" wrap
// ErrLeaseLost.
type store interface {
	// ClaimBatch claims every request in one round trip where it can; the
	// answer is in request order. An error applies to the whole batch.
	ClaimBatch(ctx context.Context, reqs []claimRequest) ([]claim, error)
	// Complete records the result, fenced: ErrLeaseLost if not the owner.
	Complete(ctx context.Context, c *claim, result []byte) error
	// Fail records a failure: terminal caches it like a result, otherwise
	// the lease is released so that the next claim proceeds.
	Fail(ctx context.Context, c *claim, cause error, terminal bool) error
	// Heartbeat stores progress details under the lease, fenced.
	Heartbeat(ctx context.Context, c *claim, details []byte) error
	// Committed reports whether c's commit landed: the key's record is
	// COMPLETED under c's fence. It settles a commit whose answer was lost.
	Committed(ctx context.Context, c *claim) (bool, error)
	// Abandon stops tracking a claim whose lease the worker gives up without
	// recording anything (the lease expires and the next claim takes over).
	Abandon(c *claim)
	// Ping reports whether Redis answers.
	Ping(ctx context.Context) error
}
