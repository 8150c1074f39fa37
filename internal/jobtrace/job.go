package jobtrace

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/noop"

	"github.com/leasehold/leasehold/outcome"
)

// maxErrLen bounds an error message recorded as a span status.
const maxErrLen = 256

func (t *Tracer) jobAttrs(jobType, key string) []attribute.KeyValue {
	return t.appendJobAttrs(make([]attribute.KeyValue, 0, 2), jobType, key)
}

// appendJobAttrs appends the job type and the redacted key to attrs.
func (t *Tracer) appendJobAttrs(attrs []attribute.KeyValue, jobType, key string) []attribute.KeyValue {
	attrs = append(attrs, attribute.String(AttrJobType, truncate(jobType, maxNameLen)))
	if k, ok := t.cfg.redact.redact(key); ok {
		attrs = append(attrs, attribute.String(AttrIdempotencyKey, k))
	}
	return attrs
}

// Job is the span of one job's attempt, from [Tracer.StartJob]. Its methods
// are safe for concurrent use: the lease renewer reports a lost lease while
// the handler runs.
type Job struct {
	t       *Tracer
	span    trace.Span
	jobType string
	key     string
	start   time.Time
	ended   atomic.Bool
	ran     atomic.Bool // a claim span ended acquired or takeover: the job runs

	mu       sync.Mutex
	lastBeat time.Time
	skipped  int
}

// Span returns the underlying span.
func (j *Job) Span() trace.Span { return j.span }

// SetFence records the fence the job runs under.
func (j *Job) SetFence(fence uint64) {
	if j.span.IsRecording() {
		j.span.SetAttributes(fenceAttr(AttrFence, fence))
	}
}

// SetAttempt records the attempt number (1 for the first).
func (j *Job) SetAttempt(n int) {
	if j.span.IsRecording() {
		j.span.SetAttributes(attribute.Int(AttrAttempt, n))
	}
}

// StartClaim starts the claim span. End it with the claim's outcome; that
// also counts the claim in leasehold.claims.
func (j *Job) StartClaim(ctx context.Context) (context.Context, *Span) {
	return j.child(ctx, SpanClaim, kindClaim, nil)
}

// RecordClaim records a claim that ran in a batch (one pipelined round trip
// for a poll's records) as a claim span from start to now.
func (j *Job) RecordClaim(ctx context.Context, start time.Time, o outcome.Name, fence uint64, err error) {
	s := Span{span: noop.Span{}, t: j.t, kind: kindClaim, key: j.key, job: j}
	if j.span.IsRecording() {
		_, s.span = j.t.tracer.Start(trace.ContextWithSpan(ctx, j.span), SpanClaim, trace.WithTimestamp(start))
		if fence != 0 {
			s.SetFence(fence)
		}
	}
	s.End(string(o), err) //nolint:contextcheck // the span's metrics need no request context
}

// StartHandler starts the span around the user's handler.
func (j *Job) StartHandler(ctx context.Context) (context.Context, *Span) {
	return j.child(ctx, SpanHandler, kindPlain, nil)
}

// StartCommit starts the span of the fenced commit.
func (j *Job) StartCommit(ctx context.Context) (context.Context, *Span) {
	return j.child(ctx, SpanCommit, kindPlain, nil)
}

// StartCompensation starts the span `compensate <step>` of one compensation
// step run for the given fence. End it with the step's outcome; that also
// counts it in leasehold.compensations.
func (j *Job) StartCompensation(ctx context.Context, step string, fence uint64) (context.Context, *Span) {
	step = truncate(step, maxNameLen)
	attrs := []attribute.KeyValue{attribute.String(AttrStep, step), fenceAttr(AttrFence, fence)}
	if k, ok := j.t.cfg.redact.redact(j.key); ok {
		attrs = append(attrs, attribute.String(AttrIdempotencyKey, k))
	}
	return j.child(ctx, SpanCompensation+" "+step, kindCompensation, attrs)
}

func (j *Job) child(ctx context.Context, name string, k spanKind, attrs []attribute.KeyValue) (context.Context, *Span) {
	// Claim, handler, commit and compensation spans are children of the job
	// span, even when ctx carries a span of the handler's own.
	if cur := trace.SpanFromContext(ctx); j.span.IsRecording() || cur.IsRecording() ||
		!cur.SpanContext().Equal(j.span.SpanContext()) {
		ctx = trace.ContextWithSpan(ctx, j.span)
	}
	// A job span that does not record (no SDK, or not sampled) gets no
	// child spans: a no-op span stands in, so that the child's metrics are
	// still counted without building a span and its attributes.
	sc := &spanCtx{Context: ctx, s: Span{span: noop.Span{}, t: j.t, kind: k, key: j.key, job: j}}
	if j.span.IsRecording() {
		sc.Context, sc.s.span = j.t.tracer.Start(ctx, name, trace.WithAttributes(attrs...))
	}
	return sc, &sc.s
}

// spanCtx is the context of a job's child span: it carries the job and the
// span (jobFromContext, spanFromContext) in one allocation with the span.
type spanCtx struct {
	context.Context
	s Span
}

func (c *spanCtx) Value(key any) any {
	switch key.(type) {
	case jobKey:
		return c.s.job
	case spanKey:
		return &c.s
	}
	return c.Context.Value(key)
}

// Heartbeat adds a heartbeat event, at most one per heartbeat event interval;
// the heartbeats skipped in between are counted on the next event. Heartbeat
// details are never recorded.
func (j *Job) Heartbeat() {
	now := j.t.cfg.now()
	j.mu.Lock()
	if !j.lastBeat.IsZero() && now.Sub(j.lastBeat) < j.t.cfg.beatEvery {
		j.skipped++
		j.mu.Unlock()
		return
	}
	skipped := j.skipped
	j.lastBeat, j.skipped = now, 0
	j.mu.Unlock()
	j.span.AddEvent(EventHeartbeat, trace.WithTimestamp(now),
		trace.WithAttributes(attribute.Int(AttrHeartbeatSkipped, skipped)))
}

// LeaseLost adds the lease-lost event with the cause of err (stolen,
// expired, renew_deadline, fenced or other; see leaseLostCause) and err's
// message.
func (j *Job) LeaseLost(err error) {
	attrs := []attribute.KeyValue{attribute.String(AttrCause, leaseLostCause(err))}
	if err != nil {
		attrs = append(attrs, attribute.String(AttrErrorMessage, j.errMessage(err)),
			attribute.String(AttrErrorType, errType(err)))
	}
	j.span.AddEvent(EventLeaseLost, trace.WithAttributes(attrs...))
}

// Takeover adds the takeover event: the claim found the previous owner's
// lease expired and took the record over from previousFence.
func (j *Job) Takeover(previousFence uint64) {
	j.span.AddEvent(EventTakeover, trace.WithAttributes(fenceAttr(AttrPreviousFence, previousFence)))
}

// DuplicateReplay adds the duplicate-replay event: the record was already
// done and its cached outcome (completed or failed) is replayed. The cached
// result itself is never recorded.
func (j *Job) DuplicateReplay(cached outcome.Name) {
	j.span.AddEvent(EventDuplicateReplay, trace.WithAttributes(attribute.String(AttrOutcome, string(cached))))
}

// DeadLettered adds the dead-lettered event and counts the record in
// leasehold.dead_lettered. reason is a short code (no_key, undecodable,
// fingerprint_mismatch, retries_exhausted, ...).
func (j *Job) DeadLettered(reason string) {
	reason = truncate(reason, maxNameLen)
	j.span.AddEvent(EventDeadLettered, trace.WithAttributes(attribute.String(AttrReason, reason)))
	j.t.metrics.DeadLettered(j.metricCtx(), reason)
}

// End ends the job span with its outcome, records the job's duration in
// leasehold.job.duration if a claim ran it (a claim span ended acquired or
// takeover: not for a duplicate, a held record, or a record dead-lettered
// before its claim), and marks the span as an error if err is not nil. Only
// the first call has an effect.
func (j *Job) End(o outcome.Name, err error) {
	if !j.ended.CompareAndSwap(false, true) {
		return
	}
	o = outcome.Name(truncate(string(o), maxNameLen))
	if j.span.IsRecording() {
		j.span.SetAttributes(attribute.String(AttrOutcome, string(o)))
		setErr(j.span, err, j.errMessage)
	}
	if j.ran.Load() {
		j.t.metrics.JobDone(j.metricCtx(), j.jobType, o, j.t.cfg.now().Sub(j.start))
	}
	j.span.End()
}

// metricCtx carries the job span, so that exemplars point at the trace, but
// not the job's cancellation.
func (j *Job) metricCtx() context.Context { return spanMetricCtx(j.span) }

// spanMetricCtx is a background context carrying sp, for the exemplars of
// the measurements sp's work records; a span without a valid span context
// has nothing to point at, and the background context alone answers the
// same to every reader.
func spanMetricCtx(sp trace.Span) context.Context {
	if !sp.SpanContext().IsValid() {
		return context.Background()
	}
	return trace.ContextWithSpan(context.Background(), sp)
}

func (j *Job) errMessage(err error) string {
	return truncate(j.t.cfg.redact.scrub(err.Error(), j.key), maxErrLen)
}

type spanKind int

const (
	kindPlain spanKind = iota
	kindClaim
	kindCompensation
)

// Span is a child span of a job (claim, handler, commit, compensation step)
// or an enqueue span.
type Span struct {
	span  trace.Span
	t     *Tracer
	kind  spanKind
	key   string
	job   *Job
	ended atomic.Bool
}

// Span returns the underlying span.
func (s *Span) Span() trace.Span { return s.span }

// SetFence records a fence on the span (the fence a claim granted, or the
// fence a commit was made under).
func (s *Span) SetFence(fence uint64) { s.span.SetAttributes(fenceAttr(AttrFence, fence)) }

// End ends the span with its outcome and marks it as an error if err is not
// nil. A claim span's outcome is counted in leasehold.claims, a compensation
// span's in leasehold.compensations. Only the first call has an effect; on a
// nil *Span (as found in a context without one) it does nothing.
func (s *Span) End(o string, err error) {
	if s == nil || !s.ended.CompareAndSwap(false, true) {
		return
	}
	o = truncate(o, maxNameLen)
	if s.span.IsRecording() {
		s.span.SetAttributes(attribute.String(AttrOutcome, o))
		setErr(s.span, err, func(err error) string {
			return truncate(s.t.cfg.redact.scrub(err.Error(), s.key), maxErrLen)
		})
	}
	switch s.kind {
	case kindClaim:
		s.t.metrics.Claim(spanMetricCtx(s.span), outcome.Name(o))
		if o == string(outcome.Acquired) || o == string(outcome.Takeover) {
			s.job.ran.Store(true)
		}
	case kindCompensation:
		s.t.metrics.Compensation(spanMetricCtx(s.span), outcome.Name(o))
	}
	s.span.End()
}

func setErr(sp trace.Span, err error, msg func(error) string) {
	if err == nil {
		return
	}
	sp.SetAttributes(attribute.String(AttrErrorType, errType(err)))
	sp.SetStatus(codes.Error, msg(err))
}

// errType is the semantic-conventions error.type value: the dynamic type of
// the first error in err's chain that is not a plain wrapper made by fmt or
// errors (e.g. "*lease.HeldError"), or "error" if there is none.
func errType(err error) string {
	for e := err; e != nil; e = errors.Unwrap(e) {
		switch t := fmt.Sprintf("%T", e); t {
		case "*errors.errorString", "*errors.joinError", "*fmt.wrapError", "*fmt.wrapErrors":
		default:
			return t
		}
	}
	return "error"
}

// fenceAttr records a fence as an int64: fences are below 2^53.
func fenceAttr(key string, fence uint64) attribute.KeyValue {
	return attribute.Int64(key, int64(fence&(1<<63-1))) //nolint:gosec // masked to 63 bits: cannot overflow
}
