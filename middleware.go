package leasehold

import (
	"context"
	"encoding/json"
	"fmt"
	"time"
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
// decoded from JSON into In (a payload that does not decode is a permanent
// failure, dead-lettered) and the returned Out is encoded as JSON to become
// the cached result.
func Typed[In, Out any](fn func(ctx context.Context, job *Job, in In) (Out, error)) Handler {
	return func(ctx context.Context, job *Job) ([]byte, error) {
		var in In
		if len(job.Payload) > 0 {
			if err := json.Unmarshal(job.Payload, &in); err != nil {
				return nil, Permanent(fmt.Errorf("leasehold: decode %s payload: %w", job.Type, err))
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

// Hooks observe the worker's decisions. Every field is optional; hooks run
// synchronously on the worker's goroutines and must not block. Tracing,
// metrics, compensation triggers and terminal views plug in here;
// [WithHooks] may be given several times and every set runs.
type Hooks struct {
	// OnClaim runs after the claim of a record is decided.
	OnClaim func(ctx context.Context, info ClaimInfo)
	// OnStart runs just before a handler starts.
	OnStart func(ctx context.Context, job *Job)
	// OnHeartbeat runs after heartbeat details were stored.
	OnHeartbeat func(ctx context.Context, job *Job, details []byte)
	// OnDone runs after a handler returned and its outcome was recorded; err
	// is the handler's error (nil on success).
	OnDone func(ctx context.Context, job *Job, result []byte, err error)
	// OnReplay runs for a duplicate whose key already completed or failed
	// terminally: result is the cached result, failure the cached failure.
	OnReplay func(ctx context.Context, info ClaimInfo, result []byte, failure string)
	// OnRetry runs when a job or a held claim is parked to be tried again
	// after delay.
	OnRetry func(ctx context.Context, info ClaimInfo, delay time.Duration, err error)
	// OnLeaseLost runs once when a running job's lease is lost, with the
	// cancellation cause. Compensation runners hook in here.
	OnLeaseLost func(ctx context.Context, job *Job, err error)
	// OnCompensated runs after the saga steps of a job's attempt were
	// compensated (err nil) or their compensation failed (err, e.g. a
	// dead-lettered journal). Only with WithCompensation.
	OnCompensated func(ctx context.Context, job *Job, err error)
	// OnDeadLetter runs after a record was written to the dead-letter topic.
	OnDeadLetter func(ctx context.Context, info ClaimInfo, reason string, err error)
	// OnPause runs when fetching pauses because Redis is unreachable, and
	// OnResume when it resumes.
	OnPause  func(err error)
	OnResume func(paused time.Duration)
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

// Outcome is the result of claiming a record's idempotency key.
type Outcome int

const (
	// OutcomeAcquired means the key was free; this worker runs the job.
	OutcomeAcquired Outcome = iota + 1
	// OutcomeTakeover means the previous owner's lease expired; this worker runs
	// the job with a newer fence and the old fence's work is compensated.
	OutcomeTakeover
	// OutcomeHeld means another worker holds a live lease on the key; the record
	// is parked and claimed again later, never committed while held.
	OutcomeHeld
	// OutcomeDuplicate means the key already completed (or failed terminally);
	// the cached outcome is replayed and the record is committed.
	OutcomeDuplicate
	// OutcomeMismatch means the key completed with a different payload; the
	// record is dead-lettered.
	OutcomeMismatch
	// OutcomeUndecodable means the payload could not be fingerprinted (the
	// configured fingerprinter rejected it); the record is dead-lettered.
	OutcomeUndecodable
)

// String returns the outcome's lower-case name.
func (o Outcome) String() string {
	switch o {
	case OutcomeAcquired:
		return "acquired"
	case OutcomeTakeover:
		return "takeover"
	case OutcomeHeld:
		return "held"
	case OutcomeDuplicate:
		return "duplicate"
	case OutcomeMismatch:
		return "mismatch"
	case OutcomeUndecodable:
		return "undecodable"
	}
	return fmt.Sprintf("outcome(%d)", int(o))
}

type hookList []Hooks

func (hl hookList) claim(ctx context.Context, info ClaimInfo) {
	for _, h := range hl {
		if h.OnClaim != nil {
			h.OnClaim(ctx, info)
		}
	}
}

func (hl hookList) start(ctx context.Context, j *Job) {
	for _, h := range hl {
		if h.OnStart != nil {
			h.OnStart(ctx, j)
		}
	}
}

func (hl hookList) heartbeat(ctx context.Context, j *Job, d []byte) {
	for _, h := range hl {
		if h.OnHeartbeat != nil {
			h.OnHeartbeat(ctx, j, d)
		}
	}
}

func (hl hookList) done(ctx context.Context, j *Job, res []byte, err error) {
	for _, h := range hl {
		if h.OnDone != nil {
			h.OnDone(ctx, j, res, err)
		}
	}
}

func (hl hookList) replay(ctx context.Context, info ClaimInfo, res []byte, failure string) {
	for _, h := range hl {
		if h.OnReplay != nil {
			h.OnReplay(ctx, info, res, failure)
		}
	}
}

func (hl hookList) retry(ctx context.Context, info ClaimInfo, d time.Duration, err error) {
	for _, h := range hl {
		if h.OnRetry != nil {
			h.OnRetry(ctx, info, d, err)
		}
	}
}

func (hl hookList) leaseLost(ctx context.Context, j *Job, err error) {
	for _, h := range hl {
		if h.OnLeaseLost != nil {
			h.OnLeaseLost(ctx, j, err)
		}
	}
}

func (hl hookList) compensated(ctx context.Context, j *Job, err error) {
	for _, h := range hl {
		if h.OnCompensated != nil {
			h.OnCompensated(ctx, j, err)
		}
	}
}

func (hl hookList) deadLetter(ctx context.Context, info ClaimInfo, reason string, err error) {
	for _, h := range hl {
		if h.OnDeadLetter != nil {
			h.OnDeadLetter(ctx, info, reason, err)
		}
	}
}

func (hl hookList) pause(err error) {
	for _, h := range hl {
		if h.OnPause != nil {
			h.OnPause(err)
		}
	}
}

func (hl hookList) resume(d time.Duration) {
	for _, h := range hl {
		if h.OnResume != nil {
			h.OnResume(d)
		}
	}
}
