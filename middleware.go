package leasehold

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/leasehold/leasehold/idempotency"
)

// Handler runs one job. It returns the result to cache under the job's key
// (replayed to duplicates) or an error. A nil error with a nil result is a
// success with an empty result. Errors are retried with backoff unless they
// wrap [ErrPermanent] (see [Permanent]) or the job type's retry policy says
// otherwise.
type Handler func(ctx context.Context, job *Job) ([]byte, error)

// Middleware wraps a Handler. Middleware registered with [WithMiddleware]
// wraps every job type; the first one given is the outermost.
type Middleware func(Handler) Handler

// Chain composes middleware so that Chain(a, b)(h) runs a, then b, then h.
func Chain(mw ...Middleware) Middleware {
	return func(h Handler) Handler {
		for i := len(mw) - 1; i >= 0; i-- {
			if mw[i] != nil {
				h = mw[i](h)
			}
		}
		return h
	}
}

// Typed adapts a function over decoded values to a Handler: the payload is
// decoded from JSON into In (a payload that does not decode fails for good
// with [ErrUndecodable], dead-lettered as undecodable) and the returned Out is encoded as JSON to become
// the cached result.
func Typed[In, Out any](fn func(ctx context.Context, job *Job, in In) (Out, error)) Handler {
	return func(ctx context.Context, job *Job) ([]byte, error) {
		var in In
		if len(job.Payload) > 0 {
			if err := json.Unmarshal(job.Payload, &in); err != nil {
				return nil, fmt.Errorf("%w as %T (job type %s): %w", ErrUndecodable, in, job.Type, err)
			}
		}
		out, err := fn(ctx, job, in)
		if err != nil {
			return nil, err
		}
		b, err := json.Marshal(out)
		if err != nil {
			return nil, Permanent(fmt.Errorf("leasehold: encode %s result: %w", job.Type, err))
		}
		return b, nil
	}
}

// ClaimInfo identifies a record and the claim decided for it.
type ClaimInfo struct {
	Key       string
	Type      string
	Topic     string
	Partition int32
	Offset    int64
	Outcome   Outcome
	Fence     uint64 // zero unless the outcome runs the job
	Attempt   int
}

// Outcome is the result of claiming a record's idempotency key. It is
// idempotency.Outcome: one enum for the store and the worker.
type Outcome = idempotency.Outcome

const (
	// OutcomeAcquired means the key was free; this worker runs the job.
	OutcomeAcquired = idempotency.Acquired
	// OutcomeTakeover means the previous owner's lease expired; this worker runs
	// the job with a newer fence and the old fence's work is compensated.
	OutcomeTakeover = idempotency.Takeover
	// OutcomeHeld means another worker holds a live lease on the key; the record
	// is parked and claimed again later, never committed while held.
	OutcomeHeld = idempotency.Held
	// OutcomeDuplicate means the key already completed (or failed terminally);
	// the cached outcome is replayed and the record is committed.
	OutcomeDuplicate = idempotency.Duplicate
	// OutcomeMismatch means the key completed with a different payload; the
	// record is dead-lettered.
	OutcomeMismatch = idempotency.Mismatch
	// OutcomeUndecodable means the payload could not be fingerprinted (the
	// configured fingerprinter rejected it); the record is dead-lettered.
	OutcomeUndecodable = idempotency.Undecodable
)
