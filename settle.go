package leasehold

import (
	"context"
	"errors"
	"log/slog"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/leasehold/leasehold/idempotency"
	"github.com/leasehold/leasehold/outcome"
)

// endKind is how an attempt at a record ended; its outcome (attemptEnd.outcome)
// is what the attempt's span, the leasehold.job.duration metric and the
// key's history report.
type endKind uint8

const (
	endCompleted    endKind = iota + 1 // the commit landed: finished
	endDuplicate                       // the key's outcome was cached and is replayed: finished
	endRetry                           // the handler failed: parked for another attempt
	endLeaseLost                       // the lease was lost: parked, claimed again
	endFailed                          // a terminal failure, dead-lettered and recorded: finished
	endUnrecorded                      // a terminal failure that could not be recorded: parked
	endRevoked                         // the partition was revoked or lost, or the worker stopped, while the record was parked: dropped
	endDeadLettered                    // rejected and dead-lettered: finished
	endCancelled                       // an operator cancelled the run, recorded terminally: finished
)

var endNames = [...]outcome.Name{
	endCompleted: outcome.Completed, endDuplicate: outcome.Duplicate, endRetry: outcome.Retry,
	endLeaseLost: outcome.LeaseLost, endFailed: outcome.Failed, endUnrecorded: outcome.Unrecorded,
	endRevoked: outcome.Revoked, endDeadLettered: outcome.DeadLettered, endCancelled: outcome.Cancelled,
}

// name is the kind's outcome, before outcome tells a lost lease or a
// retry apart by its cause.
func (k endKind) name() outcome.Name {
	if int(k) < len(endNames) && endNames[k] != "" {
		return endNames[k]
	}
	return outcome.Error
}

func (k endKind) String() string { return string(k.name()) }

// outcome names how the attempt ended, for its span, the job duration
// metric and its history (one name for all three); stopping tells that the
// worker was shutting down. A retry cancelled by the shutdown, or a lease
// given up for it, is cancelled; a commit Redis refused before the worker
// saw the lease lost (the lease is another's or gone) is commit_refused.
func (e attemptEnd) outcome(stopping bool) outcome.Name {
	switch {
	case e.kind == endRetry && stopping && errors.Is(e.err, context.Canceled):
		return outcome.Cancelled
	case e.kind != endLeaseLost:
		return e.kind.name()
	case errors.Is(e.err, ErrShutdown):
		return outcome.Cancelled
	case errors.Is(e.err, idempotency.ErrRefused):
		return outcome.CommitRefused
	}
	return outcome.LeaseLost
}

// attemptEnd is what one attempt at a record came to: execute (run.go) or
// the dispatcher produces it, settle and report act on it.
type attemptEnd struct {
	kind    endKind
	job     *Job      // nil for ends without a run (duplicate, revoked)
	info    ClaimInfo // the record and its claim
	result  []byte    // completed: the committed result; duplicate: the cached one
	failure string    // duplicate: the cached terminal failure

	err   error         // retry, failed: the handler's error; lease lost: the cause; unrecorded: the store's
	delay time.Duration // parked ends: the wait before the next claim

	reason string // failed: the dead-letter reason
	dlqErr error  // failed: the error the dead-letter copy carries
}

// settle acts on the end of a run, in one order for every kind: the
// heartbeats stop, the saga steps are compensated, the outcome is written to
// the store, and report tells the observers and finishes or parks the
// record. Compensation runs before the store write because a retryable
// failure releases the lease and a terminal one ends the key.
func (w *Worker) settle(job *Job, e attemptEnd) {
	w.holdRetryAfter(job, e)
	switch e.kind {
	case endCompleted:
		w.report(job.ctx, job.d, e)
	case endLeaseLost:
		w.settleLeaseLost(job, e)
	case endRetry:
		w.settleRetry(job, e)
	case endFailed:
		w.settleFailed(job, e)
	case endCancelled:
		w.settleCancelled(job, e)
	}
}

// settleLeaseLost: the lease is gone, so nothing is recorded; the steps are
// compensated and the record claimed again (a takeover with a newer fence,
// or a duplicate if another worker finished it meanwhile).
func (w *Worker) settleLeaseLost(job *Job, e attemptEnd) {
	job.hb.stop(job, false)
	job.c.run.Abandon()
	w.obs.lostLease(job.ctx, job.d, job, e.err)
	w.compensate(job)
	w.report(job.ctx, job.d, e)
}

// settleRetry keeps the attempt's progress (pending heartbeat details are
// flushed) for the next attempt, undoes its saga steps (an attempt is all or
// nothing), and records the failure, which releases the lease.
func (w *Worker) settleRetry(job *Job, e attemptEnd) {
	job.hb.stop(job, true)
	w.compensate(job)
	if err := job.c.run.Fail(context.WithoutCancel(job.ctx), e.err, false); err != nil {
		job.c.run.Abandon() // the lease expires and the next claim takes over
	}
	w.report(job.ctx, job.d, e)
}

// settleFailed dead-letters the record, then records the failure. The copy
// is written first: a crash between the two leaves a lease that expires and
// a record claimed again (whose copy exists: not written twice), never a
// recorded failure whose record never reached the dead-letter topic. The
// record outlives runJob, so the failure is recorded under the lease's
// context, not the job's.
func (w *Worker) settleFailed(job *Job, e attemptEnd) {
	job.hb.stop(job, true)
	w.compensate(job)
	ctx := context.WithoutCancel(job.ctx)
	w.deadLetterThen(job.d, e.reason, e.dlqErr, func() bool {
		lctx := job.c.run.Context()
		err := w.retryStore(lctx, func(ctx context.Context) error { return job.c.run.Fail(ctx, e.err, true) }) //nolint:contextcheck // recorded under the lease's context: the record outlives runJob
		if err == nil {
			w.obs.ended(ctx, job.d, e)
			return true // deadLetterThen finishes the record
		}
		job.c.run.Abandon()
		w.log.Warn("recording a terminal failure failed; the key will be claimed again",
			slog.String("key", job.Key), slog.Any("err", err))
		w.report(ctx, job.d, attemptEnd{kind: endUnrecorded, job: job, info: e.info, err: err, delay: e.delay})
		return false
	})
}

// compensate undoes the saga steps of job's attempt, if it ran any. It runs
// detached from the job's cancellation, bounded by the runner's journal
// timeout.
func (w *Worker) compensate(job *Job) {
	jr := job.stepped()
	if jr == nil {
		return
	}
	err := jr.Compensate(context.WithoutCancel(job.ctx))
	w.obs.compensated(job.ctx, job, err)
}

// report tells the observers how the attempt at d ended, then finishes the
// record (its offset may be committed), parks it for another claim, or
// drops it (its partition is gone).
func (w *Worker) report(ctx context.Context, d *delivery, e attemptEnd) {
	w.obs.ended(ctx, d, e)
	switch e.kind {
	case endCompleted, endDuplicate, endFailed, endDeadLettered, endCancelled:
		w.finish(d)
	case endRetry, endLeaseLost, endUnrecorded:
		if e.kind == endRetry && w.shareReleaseNow(e.delay) {
			w.shareAck(d, kgo.AckRelease) // the broker delivers it again at once
		} else if w.stopCtx.Err() == nil { // shutting down: left for the partition's next owner
			w.park(w.stopCtx, d, e.info, e.delay, e.err) //nolint:contextcheck // a retry is reported under the worker's context, cancelled when shutdown begins
		}
	case endRevoked:
		w.sched.finished(d)
	}
}

// park schedules d's next claim after delay; err is why (nil for a key held
// by another worker).
func (w *Worker) park(ctx context.Context, d *delivery, info ClaimInfo, delay time.Duration, err error) {
	w.obs.parked(ctx, info, delay, err)
	w.sched.park(d, time.Now().Add(delay))
}

// finish marks a record done: its offset may be committed.
func (w *Worker) finish(d *delivery) {
	if w.share != nil {
		w.shareAck(d, kgo.AckAccept)
		return
	}
	w.offs.done(d.tracker, d.rec.Offset)
	w.sched.finished(d)
	if w.budget.full.Load() {
		w.wakePoll() // the dispatcher may poll again
	}
}
