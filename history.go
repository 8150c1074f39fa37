package leasehold

import (
	"context"
	"log/slog"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"

	"go.opentelemetry.io/otel/trace"

	"github.com/leasehold/leasehold/compensation"
	"github.com/leasehold/leasehold/idempotency"
	"github.com/leasehold/leasehold/internal/jobtrace"
)

// historyTimeout bounds one history write, and historyReadTimeout the read
// of a lost attempt's span before a compensation step: the history is an
// account for operators, and a Redis that does not answer must not hold a
// job or a compensation back for long (a write that times out is lost; a
// read that does leaves the step's span out of the attempt's trace, so it
// gets a second: 250ms was too short on a loaded machine).
const (
	historyTimeout     = 500 * time.Millisecond
	historyReadTimeout = time.Second
)

// historyObserver writes the ends of attempts that the scripts do not into
// their key's history (idempotency.Store.History). The claim script writes
// each attempt's start (fence, owner digest, attempt, the worker and the
// span passed in its request: the tracer starts the span before the claim)
// and the complete script a completed or failed end, each in the step that
// changes the record; the rarer ends (retry, lease lost, commit refused,
// cancelled, unrecorded) are written here, one idem_history.lua call each.
// A write that fails is logged, never retried.
type historyObserver struct {
	w *Worker
}

// workerIdentity is the worker's identity in a key's history: host/pid.
var workerIdentity = sync.OnceValue(func() string {
	host, _ := os.Hostname()
	return host + "/" + strconv.Itoa(os.Getpid())
})

func newHistoryObserver(w *Worker) historyObserver { return historyObserver{w: w} }

func (h historyObserver) store() *idempotency.Store {
	if rs, ok := h.w.store.(*redisStore); ok {
		return rs.s
	}
	return nil
}

func (h historyObserver) observeEnd(ctx context.Context, _ *delivery, e attemptEnd) {
	s := h.store()
	if s == nil || e.job == nil || s.HistoryLen() <= 0 {
		return
	}
	switch e.kind {
	case endCompleted, endFailed:
		return // the complete script wrote it with the outcome
	}
	end := string(e.outcome(h.w.stopCtx.Err() != nil))
	h.write(ctx, e.job.Key, func(ctx context.Context) error { return s.HistoryEnd(ctx, e.job.Key, e.job.fence, end) })
}

func (h historyObserver) write(ctx context.Context, key string, f func(context.Context) error) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), historyTimeout)
	defer cancel()
	if err := f(ctx); err != nil {
		h.w.log.Debug("writing the key's history failed", slog.String("key", key), slog.Any("err", err))
	}
}

// compensationObserver runs each compensation step under a span (with
// WithTracing; see compensationSpans) and writes its outcome into the
// attempt's history.
func compensationObserver(tr *jobtrace.Tracer, s *idempotency.Store, log *slog.Logger) compensation.ObserverFuncs {
	spans := compensationSpans(tr, s)
	return compensation.ObserverFuncs{
		Start: spans.StepStart,
		End: func(ctx context.Context, st compensation.StepInfo, o compensation.Outcome, err error) {
			spans.StepEnd(ctx, st, o, err)
			key := keyOfLease(st.Ref.Name)
			hctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), historyTimeout)
			defer cancel()
			c := idempotency.CompensationStep{Step: st.Name, Handler: st.Handler, Outcome: string(o)}
			if herr := s.HistoryCompensation(hctx, key, st.Ref.Fence, c); herr != nil {
				log.Debug("writing the key's history failed", slog.String("key", key), slog.Any("err", herr))
			}
		},
	}
}

// compensationSpans runs each compensation step under a `compensate <step>`
// span and ends it with the step's outcome, which also counts the step in
// leasehold.compensations. Run by the owner after a lost lease, the span is
// a child of the job span; run by a takeover, a child of the taking-over
// job's span, linked to the lost attempt's span (read back from the key's
// history); run by the sweep, it belongs to the lost attempt's trace. Each
// carries the key attribute as the job spans do. The runner hands StepEnd
// its own context rather than the one StepStart returned, so the span is
// found again by the step's identity (journal, step, attempt, generation:
// unique per claimed attempt). Without a tracer it does nothing.
func compensationSpans(tr *jobtrace.Tracer, s *idempotency.Store) compensation.ObserverFuncs {
	if tr == nil {
		return compensation.ObserverFuncs{}
	}
	var open sync.Map // compensation.StepInfo -> *jobtrace.Span
	return compensation.ObserverFuncs{
		Start: func(ctx context.Context, st compensation.StepInfo) context.Context {
			key := keyOfLease(st.Ref.Name)
			if jobtrace.InJob(ctx) {
				// The owner after a lost lease or refused commit: a child
				// of its job span.
				ctx, sp := tr.StartCompensationStep(ctx, st.Name, st.Ref.Fence)
				open.Store(st, sp)
				return ctx
			}
			// A takeover inside its own job (ctx holds that job's span: the
			// step is its child, linked to the lost attempt's span), the
			// sweep or an operator's retry (the step joins the lost
			// attempt's trace); each with the key attribute.
			attempt := attemptSpan(ctx, s, key, st.Ref.Fence)
			if cur := trace.SpanContextFromContext(ctx); cur.IsValid() && cur.SpanID() == attempt.SpanID() {
				// The attempt's own span (its owner compensating): a child
				// of it, not also a link to it (Jaeger would read the link
				// as the only reference and lose the parent).
				attempt = trace.SpanContext{}
			}
			ctx, sp := tr.StartAttemptCompensation(ctx, st.Name, key, st.Ref.Fence, attempt)
			open.Store(st, sp)
			return ctx
		},
		End: func(ctx context.Context, st compensation.StepInfo, o compensation.Outcome, err error) {
			if v, ok := open.LoadAndDelete(st); ok {
				v.(*jobtrace.Span).End(string(o), err) //nolint:contextcheck // End counts the outcome under the span's own context
				return
			}
			// No span was started for it: count it all the same.
			tr.Metrics().Compensation(ctx, o)
		},
	}
}

// attemptSpan reads the span of key's attempt under fence from the key's
// history, or returns an invalid span context.
func attemptSpan(ctx context.Context, s *idempotency.Store, key string, fence uint64) trace.SpanContext {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), historyReadTimeout)
	defer cancel()
	hs, err := s.History(ctx, key)
	if err != nil {
		return trace.SpanContext{}
	}
	for i := len(hs) - 1; i >= 0; i-- {
		if hs[i].Fence != fence {
			continue
		}
		tid, err1 := trace.TraceIDFromHex(hs[i].TraceID)
		sid, err2 := trace.SpanIDFromHex(hs[i].SpanID)
		if err1 != nil || err2 != nil {
			break
		}
		return trace.NewSpanContext(trace.SpanContextConfig{TraceID: tid, SpanID: sid, TraceFlags: trace.FlagsSampled, Remote: true})
	}
	return trace.SpanContext{}
}

// keyOfLease returns the idempotency key of a job's lease name ("{tag}:key").
func keyOfLease(name string) string {
	if strings.HasPrefix(name, "{") {
		if i := strings.Index(name, "}:"); i > 0 {
			return name[i+2:]
		}
	}
	return name
}
