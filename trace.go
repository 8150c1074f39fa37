package leasehold

import (
	"context"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"

	"github.com/leasehold/leasehold/internal/jobtrace"
	"github.com/leasehold/leasehold/outcome"
	"github.com/leasehold/leasehold/tracing"
)

// traceObserver traces every record and counts it in the worker's metrics
// (always on; WithTracerProvider): an observer of the worker's events. A delivery carries the
// span of its current attempt (d.tj) from its first claim to the attempt's
// end; parking a held record keeps the span open, and a new attempt (after a
// retry or a lost lease) starts a new span. A parked record dropped because
// its partition was revoked or lost, or the worker stopped, ends its span as
// revoked (endDropped).
type traceObserver struct {
	tr       *jobtrace.Tracer
	base     context.Context // parents job spans
	stopping func() bool     // whether the worker is shutting down
}

var (
	_ claimingObserver          = traceObserver{}
	_ claimObserver             = traceObserver{}
	_ heartbeatObserver         = traceObserver{}
	_ leaseLostObserver         = traceObserver{}
	_ endObserver               = traceObserver{}
	_ deadLetterDecidedObserver = traceObserver{}
	_ deadLetteredObserver      = traceObserver{}
)

// span returns d's attempt span, starting it if the attempt has none yet.
func (t traceObserver) span(d *delivery) *jobtrace.Job {
	if d.tj == nil {
		d.tctx, d.tj = t.tr.StartJob(t.base, d.rec, d.typ, d.key)
	}
	return d.tj
}

// observeClaiming starts d's attempt span before its claim: the claim
// writes the span's IDs into the key's history.
func (t traceObserver) observeClaiming(d *delivery) { t.span(d) }

func (t traceObserver) observeClaim(_ context.Context, d *delivery, c *claim, start time.Time) {
	tj := t.span(d)
	tj.RecordClaim(d.tctx, start, claimOutcome(c), c.Fence, c.Err) //nolint:contextcheck // the claim span is a child of the record's span
	switch c.Outcome {
	case OutcomeAcquired, OutcomeTakeover:
		tj.SetFence(c.Fence)
		tj.SetAttempt(max(c.Attempt, 1))
		if c.Outcome == OutcomeTakeover {
			tj.Takeover(c.PrevFence)
		}
	case OutcomeDuplicate:
		cached := outcome.Completed
		if c.Failure != "" {
			cached = outcome.Failed
		}
		tj.DuplicateReplay(cached)
	}
}

func (t traceObserver) observeHeartbeat(_ context.Context, j *Job, _ []byte) {
	if j.tj != nil {
		j.tj.Heartbeat()
	}
}

func (t traceObserver) observeLeaseLost(_ context.Context, d *delivery, _ *Job, cause error) {
	if d.tj != nil {
		d.tj.LeaseLost(cause)
	}
}

func (t traceObserver) observeEnd(_ context.Context, d *delivery, e attemptEnd) {
	endSpan(d, e.outcome(t.stopping()), e.err) //nolint:contextcheck // End counts the outcome under the span's own context
}

// observeDeadLetterDecided records the decision on d's span (starting one
// for a record rejected before any claim) and ends it; the copy is counted
// by observeDeadLettered once the broker acknowledged it. The returned
// context carries d's span, for the dead-lettering's own spans and the
// count's exemplar.
func (t traceObserver) observeDeadLetterDecided(ctx context.Context, d *delivery, reason string, err error) context.Context {
	tj := t.span(d)
	ctx = trace.ContextWithSpan(ctx, tj.Span())
	tj.Span().AddEvent(tracing.EventDeadLettered, trace.WithAttributes(attribute.String(tracing.AttrReason, reason)))
	endSpan(d, outcome.DeadLettered, err)
	return ctx
}

func (t traceObserver) observeDeadLettered(ctx context.Context, _ *delivery, dl deadLettered) {
	t.tr.Metrics().DeadLettered(ctx, dl.reason)
}

// claimOutcome names a claim's outcome: outcome.Error for one that could
// not be made.
func claimOutcome(c *claim) outcome.Name {
	if c.Err != nil && c.Outcome == 0 {
		return outcome.Error
	}
	return c.Outcome.Name()
}

// endSpan ends d's attempt span, if it has one.
func endSpan(d *delivery, o outcome.Name, err error) {
	if d.tj == nil {
		return
	}
	d.tj.End(o, err)
	d.tj, d.tctx = nil, nil
}

// traceContext puts d's job span into ctx, so that the handler's spans are
// its children. ctxSpan tells whether ctx carries a valid span (the worker
// looks it up once: each lookup that reaches a context.WithoutCancel boxes
// it, an allocation a job).
func traceContext(ctx context.Context, ctxSpan bool, d *delivery) context.Context {
	if d.tj == nil {
		return ctx
	}
	sp := d.tj.Span()
	if !sp.SpanContext().IsValid() && !ctxSpan {
		return ctx // no span either way (nothing records): no context to make
	}
	return trace.ContextWithSpan(ctx, sp)
}

// childSpan is a child of a job span (handler, commit): an operation's
// span, not an event.
type childSpan interface {
	End(o string, err error)
}

type noSpan struct{}

func (noSpan) End(string, error) {}

// startChild starts the handler or commit span of job's attempt (noSpan
// without tracing).
func startChild(ctx context.Context, job *Job, start func(*jobtrace.Job, context.Context) (context.Context, *jobtrace.Span)) (context.Context, childSpan) {
	if job.tj == nil {
		return ctx, noSpan{}
	}
	return start(job.tj, ctx)
}
