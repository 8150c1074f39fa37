package leasehold

import (
	"cmp"
	"log/slog"

	"go.opentelemetry.io/otel/trace"

	"github.com/leasehold/leasehold/tracing"
)

// workerLogger is the worker's logger: l, or slog.Default() when l is nil,
// through a handler that adds trace_id and span_id to lines logged with a
// context that carries a span (see tracing.NewLogHandler).
func workerLogger(l *slog.Logger) *slog.Logger {
	l = cmp.Or(l, slog.Default())
	return slog.New(tracing.NewLogHandler(l.Handler()))
}

// Logger returns the worker's logger ([WithLogger], default slog.Default())
// for this job: its lines carry job_type, key, fence and attempt and, with
// [WithTracing], trace_id and span_id of the span they are logged under: the
// context's span with logger.InfoContext(ctx, ...) (in a handler, ctx is the
// handler span's), else the job's span. Jaeger finds the trace by that ID.
func (j *Job) Logger() *slog.Logger {
	h := tracing.NewLogHandlerWithSpan(j.w.log.Handler(), trace.SpanContextFromContext(j.ctx))
	return slog.New(h).With(slog.String("job_type", j.Type), slog.String("key", j.Key),
		slog.Uint64("fence", j.fence), slog.Int("attempt", j.Attempt))
}
