package leasehold

import (
	"context"
	"fmt"
	"log/slog"
	"strings"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"

	"github.com/leasehold/leasehold/tracing"
)

// Cancelling a running job. An operator's request (worker cancel, inspect's
// Inspector.Cancel) is stored with the key's lease for the fence then
// running; the holder learns it from its next lease renewal (no poll of its
// own), cancels the job's context with a *CancelledError, compensates the
// saga steps and records the key as failed terminally with the
// cancellation's text, which later deliveries replay (until worker reset).

// CancelledError is the cancellation cause of a job that an operator
// cancelled. It matches [ErrCancelled]; its text is the key's recorded
// outcome.
type CancelledError struct {
	Key   string
	Fence uint64
}

// Error implements error.
func (e *CancelledError) Error() string {
	return fmt.Sprintf("%s by an operator (key %q, fence %d)", ErrCancelled.Error(), e.Key, e.Fence)
}

// Is reports ErrCancelled as matching.
func (e *CancelledError) Is(target error) bool { return target == ErrCancelled }

// IsCancelledFailure reports whether a key's cached terminal failure (a
// duplicate's failure in Hooks.OnReplay, inspect's KeyInfo.Failure) is the
// record of an operator's cancel.
func IsCancelledFailure(failure string) bool {
	return strings.HasPrefix(failure, ErrCancelled.Error()+" by an operator")
}

// EventCancelled is the event a job's span carries when an operator
// cancelled it.
const EventCancelled = "leasehold.cancelled"

// settleCancelled: the handler was cancelled by an operator. Its saga steps
// are compensated, then the cancel is recorded as the key's terminal outcome
// (no dead-letter copy: the operator asked for it). When the record cannot
// be written (the lease was lost meanwhile), the attempt ends as a lost
// lease would: the next claim takes the key over, under a new fence that the
// cancel does not cover.
func (w *Worker) settleCancelled(job *Job, e attemptEnd) {
	job.hb.stop(job, false)
	w.obs.cancelled(job.ctx, job.d, job, e.err)
	w.compensate(job)
	lctx := job.c.run.Context()
	err := w.retryStore(lctx, func(ctx context.Context) error { return job.c.run.Fail(ctx, e.err, true) }) //nolint:contextcheck // recorded under the lease's context: the record outlives runJob
	if err != nil {
		job.c.run.Abandon()
		w.log.Warn("recording a cancel failed; the key will be claimed again",
			slog.String("key", job.Key), slog.Uint64("fence", job.fence), slog.Any("err", err))
		w.report(job.ctx, job.d, attemptEnd{kind: endLeaseLost, job: job, info: e.info, err: err, delay: e.delay})
		return
	}
	w.report(job.ctx, job.d, e)
}

// cancelled: an operator cancelled j (cause matches ErrCancelled); its saga
// steps are compensated next.
func (o *observers) cancelled(ctx context.Context, d *delivery, j *Job, cause error) {
	for _, x := range o.onCancel {
		x.observeCancel(ctx, d, j, cause)
	}
}

var (
	_ cancelObserver = Hooks{}
	_ cancelObserver = logObserver{}
	_ cancelObserver = traceObserver{}
)

func (h Hooks) observeCancel(ctx context.Context, _ *delivery, j *Job, cause error) {
	if h.OnCancel != nil {
		h.OnCancel(context.WithoutCancel(ctx), j, cause)
	}
}

func (l logObserver) observeCancel(ctx context.Context, d *delivery, j *Job, _ error) {
	l.log.WarnContext(ctx, "job cancelled by an operator", slog.String("key", d.key), slog.Uint64("fence", j.fence))
}

func (t traceObserver) observeCancel(_ context.Context, d *delivery, j *Job, _ error) {
	if d.tj != nil {
		d.tj.Span().AddEvent(EventCancelled, trace.WithAttributes(attribute.Int64(tracing.AttrFence, int64(j.fence)))) //nolint:gosec // a fence is far below 2^63
	}
}
