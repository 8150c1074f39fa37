package leasehold

import (
	"context"
	"time"
)

// Hooks observe the worker's decisions. Every field is optional; hooks run
// synchronously on the worker's goroutines and must not block. Tracing,
// metrics, compensation triggers and terminal views plug in here;
// [WithHooks] may be given several times and every set runs.
type Hooks struct {
	// OnClaim runs after the claim of a record is decided.
	OnClaim func(ctx context.Context, info ClaimInfo)
	// OnStart runs just before a handler starts.
	OnStart func(ctx context.Context, job *Job)
	// OnHeartbeat runs after heartbeat details were accepted: a job's first
	// are stored by then, later ones with the next lease renewal (at once
	// with a WithHeartbeatThrottle shorter than the renew interval).
	OnHeartbeat func(ctx context.Context, job *Job, details []byte)
	// OnDone runs after a handler returned and its outcome was recorded; err
	// is the handler's error (nil on success). After a completion or a retry
	// ctx is the job's context, still live (it ends when OnDone returns);
	// after a terminal failure, a live context of its own; after a lost
	// lease or a cancel, the job's context, cancelled with that cause.
	OnDone func(ctx context.Context, job *Job, result []byte, err error)
	// OnReplay runs for a duplicate whose key already completed or failed
	// terminally: result is the cached result, failure the cached failure.
	OnReplay func(ctx context.Context, info ClaimInfo, result []byte, failure string)
	// OnRetry runs when a job, or a claim that failed with err, is parked
	// to be tried again after delay. A key held by another worker is not a
	// retry: OnHeld reports it.
	OnRetry func(ctx context.Context, info ClaimInfo, delay time.Duration, err error)
	// OnHeld runs when a record's key is held by another worker's running
	// attempt: the record is parked, uncommitted, and claimed again after
	// delay (when the holder finishes it is replayed as a duplicate).
	OnHeld func(ctx context.Context, info ClaimInfo, delay time.Duration)
	// OnLeaseLost runs once when a running job's lease is lost, with the
	// cancellation cause. Compensation runners hook in here.
	OnLeaseLost func(ctx context.Context, job *Job, err error)
	// OnCancel runs once when an operator cancelled a running job (see
	// [ErrCancelled]), with the cancellation cause, before its saga steps
	// are compensated.
	OnCancel func(ctx context.Context, job *Job, err error)
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

// A Hooks value is one of the worker's observers (observe.go): each
// method below passes one event on to the matching field.
var (
	_ claimObserver        = Hooks{}
	_ startObserver        = Hooks{}
	_ heartbeatObserver    = Hooks{}
	_ leaseLostObserver    = Hooks{}
	_ compensatedObserver  = Hooks{}
	_ endObserver          = Hooks{}
	_ parkObserver         = Hooks{}
	_ deadLetteredObserver = Hooks{}
	_ pauseObserver        = Hooks{}
	_ resumeObserver       = Hooks{}
)

// observeClaim runs OnClaim for a claim that was decided (not failed).
func (h Hooks) observeClaim(ctx context.Context, d *delivery, c *claim, _ time.Time) {
	if h.OnClaim != nil && c.Err == nil {
		h.OnClaim(ctx, claimInfo(d, c))
	}
}

func (h Hooks) observeStart(ctx context.Context, j *Job) {
	if h.OnStart != nil {
		h.OnStart(ctx, j)
	}
}

func (h Hooks) observeHeartbeat(ctx context.Context, j *Job, details []byte) {
	if h.OnHeartbeat != nil {
		h.OnHeartbeat(ctx, j, details)
	}
}

func (h Hooks) observeLeaseLost(ctx context.Context, _ *delivery, j *Job, cause error) {
	if h.OnLeaseLost != nil {
		h.OnLeaseLost(context.WithoutCancel(ctx), j, cause)
	}
}

func (h Hooks) observeCompensated(ctx context.Context, j *Job, err error) {
	if h.OnCompensated != nil {
		h.OnCompensated(ctx, j, err)
	}
}

// observeEnd runs OnReplay for a duplicate and OnDone for the end of a run
// whose outcome was recorded.
func (h Hooks) observeEnd(ctx context.Context, d *delivery, e attemptEnd) {
	switch e.kind {
	case endDuplicate:
		if h.OnReplay != nil {
			h.OnReplay(ctx, e.info, e.result, e.failure)
		}
	case endCompleted, endRetry, endLeaseLost, endFailed, endCancelled:
		if h.OnDone != nil {
			h.OnDone(ctx, e.job, e.result, e.err)
		}
	}
}

// observePark runs OnHeld for a held key, OnRetry for anything else parked.
func (h Hooks) observePark(ctx context.Context, info ClaimInfo, delay time.Duration, err error) {
	switch {
	case info.Outcome == OutcomeHeld && err == nil:
		if h.OnHeld != nil {
			h.OnHeld(ctx, info, delay)
		}
	case h.OnRetry != nil:
		h.OnRetry(ctx, info, delay, err)
	}
}

func (h Hooks) observeDeadLettered(ctx context.Context, d *delivery, dl deadLettered) {
	if h.OnDeadLetter != nil {
		h.OnDeadLetter(ctx, d.info(), dl.reason, dl.cause)
	}
}

func (h Hooks) observePause(cause error) {
	if h.OnPause != nil {
		h.OnPause(cause)
	}
}

func (h Hooks) observeResume(paused time.Duration) {
	if h.OnResume != nil {
		h.OnResume(paused)
	}
}
