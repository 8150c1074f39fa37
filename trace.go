package leasehold

import (
	"context"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"

	"github.com/leasehold/leasehold/tracing"
)

// Tracing glue: every function is a no-op without WithTracing. A delivery
// carries the span of its current attempt (d.tj) from its first claim to the
// attempt's end; parking a held record keeps the span open, and a new
// attempt (after a retry or a lost lease) starts a new span.

// deadLetterReasons are every reason the worker dead-letters a record for:
// leasehold.dead_lettered shows each at 0 from the worker's start.
var deadLetterReasons = []string{
	ReasonMissingKey, ReasonInvalidKey, ReasonInvalidType, ReasonUnknownType, ReasonPayloadTooLarge,
	ReasonMismatch, ReasonUndecodable, ReasonPermanent, ReasonAttemptsExceeded, ReasonCorruptRecord,
	ReasonResultTooLarge,
}

// traceClaim records one batched claim of d.
func (w *Worker) traceClaim(d *delivery, start time.Time, c *claim) {
	if w.cfg.tracer == nil {
		return
	}
	if d.tj == nil {
		d.tctx, d.tj = w.cfg.tracer.StartJob(w.baseCtx, d.rec, d.typ, d.key)
	}
	outcome := c.Outcome.String()
	if c.Err != nil && c.Outcome == 0 {
		outcome = "error"
	}
	d.tj.RecordClaim(d.tctx, start, outcome, c.Fence, c.Err)
	switch c.Outcome {
	case OutcomeAcquired, OutcomeTakeover:
		d.tj.SetFence(c.Fence)
		d.tj.SetAttempt(max(c.Attempt, 1))
		if c.Outcome == OutcomeTakeover {
			d.tj.Takeover(c.PrevFence)
		}
	case OutcomeDuplicate:
		cached := "completed"
		if c.Failure != "" {
			cached = "failed"
		}
		d.tj.DuplicateReplay(cached)
	}
}

// traceEnd ends d's attempt span with outcome.
func (w *Worker) traceEnd(d *delivery, outcome string, err error) {
	if d.tj == nil {
		return
	}
	d.tj.End(outcome, err)
	d.tj, d.tctx = nil, nil
}

// traceDeadLetter records the decision to dead-letter d (starting a span for
// a record rejected before any claim): the dead-lettered event on d's span.
// The copy is counted in leasehold.dead_lettered by countDeadLetter, once the
// broker acknowledged it. It returns ctx with d's span, for the
// dead-lettering's own spans and the count's exemplar.
func (w *Worker) traceDeadLetter(ctx context.Context, d *delivery, reason string, err error) context.Context {
	if w.cfg.tracer == nil {
		return ctx
	}
	if d.tj == nil {
		d.tctx, d.tj = w.cfg.tracer.StartJob(w.baseCtx, d.rec, d.typ, d.key)
	}
	ctx = traceContext(ctx, d)
	d.tj.Span().AddEvent(tracing.EventDeadLettered, trace.WithAttributes(attribute.String(tracing.AttrReason, reason)))
	w.traceEnd(d, "dead_lettered", err)
	return ctx
}

// countDeadLetter counts a dead-letter copy the broker acknowledged in
// leasehold.dead_lettered; ctx carries the record's span for exemplars.
func (w *Worker) countDeadLetter(ctx context.Context, reason string) {
	if w.cfg.tracer == nil {
		return
	}
	w.cfg.tracer.Metrics().DeadLettered(ctx, reason)
}

// traceContext puts d's job span into ctx, so that the handler's spans are
// its children.
func traceContext(ctx context.Context, d *delivery) context.Context {
	if d.tj == nil {
		return ctx
	}
	return trace.ContextWithSpan(ctx, d.tj.Span())
}

// traceSpan is a child span (handler, commit) or nil.
type traceSpan interface {
	End(outcome string, err error)
}

type noSpan struct{}

func (noSpan) End(string, error) {}

func (w *Worker) traceHandler(ctx context.Context, d *delivery) (context.Context, traceSpan) {
	if d.tj == nil {
		return ctx, noSpan{}
	}
	return d.tj.StartHandler(ctx)
}

func (w *Worker) traceCommit(ctx context.Context, d *delivery) (context.Context, traceSpan) {
	if d.tj == nil {
		return ctx, noSpan{}
	}
	return d.tj.StartCommit(ctx)
}
