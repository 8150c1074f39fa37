package leasehold

import (
	"cmp"
	"context"
	"log/slog"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/plugin/kslog"
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

// kafkaLogger is franz-go's logger: the worker's, for lines at min and above
// (nil: slog.LevelWarn).
func kafkaLogger(l *slog.Logger, min slog.Leveler) kgo.Logger {
	if min == nil {
		min = slog.LevelWarn
	}
	return kslog.New(slog.New(minLevelHandler{l.Handler(), min}))
}

// minLevelHandler passes on the records of h at min and above.
type minLevelHandler struct {
	h   slog.Handler
	min slog.Leveler
}

func (m minLevelHandler) Enabled(ctx context.Context, l slog.Level) bool {
	return l >= m.min.Level() && m.h.Enabled(ctx, l)
}

func (m minLevelHandler) Handle(ctx context.Context, r slog.Record) error { return m.h.Handle(ctx, r) }

func (m minLevelHandler) WithAttrs(as []slog.Attr) slog.Handler {
	return minLevelHandler{m.h.WithAttrs(as), m.min}
}

func (m minLevelHandler) WithGroup(name string) slog.Handler {
	return minLevelHandler{m.h.WithGroup(name), m.min}
}

// Logger returns the worker's logger ([WithLogger], default slog.Default())
// for this job: its lines carry job_type, key, fence and attempt and, with
// [WithTracing], trace_id and span_id of the span they are logged under: the
// context's span with logger.InfoContext(ctx, ...) (in a handler, ctx is the
// handler span's), else the job's span. Jaeger finds the trace by that ID.
// A Job not run by a worker logs nowhere, unless package leaseholdtest
// built it with a logger.
func (j *Job) Logger() *slog.Logger {
	if j.env != nil {
		return j.env.Logger()
	}
	if j.w == nil {
		return slog.New(slog.DiscardHandler)
	}
	h := tracing.NewLogHandlerWithSpan(j.w.log.Handler(), trace.SpanContextFromContext(j.ctx))
	return slog.New(h).With(slog.String("job_type", j.Type), slog.String("key", j.Key),
		slog.Uint64("fence", j.fence), slog.Int("attempt", j.Attempt))
}

// logObserver logs the worker's events that an operator acts on: lost
// leases, failed compensations, dead letters, pauses and resumes.
type logObserver struct{ log *slog.Logger }

var (
	_ leaseLostObserver    = logObserver{}
	_ compensatedObserver  = logObserver{}
	_ deadLetteredObserver = logObserver{}
	_ pauseObserver        = logObserver{}
	_ resumeObserver       = logObserver{}
)

func (l logObserver) observeLeaseLost(ctx context.Context, d *delivery, j *Job, cause error) {
	l.log.WarnContext(ctx, "lease lost", slog.String("key", d.key), slog.Uint64("fence", j.fence), slog.Any("cause", cause))
}

func (l logObserver) observeCompensated(ctx context.Context, j *Job, err error) {
	if err != nil {
		l.log.ErrorContext(ctx, "compensation failed", slog.String("key", j.Key), slog.Uint64("fence", j.fence), slog.Any("err", err))
	}
}

func (l logObserver) observeDeadLettered(ctx context.Context, d *delivery, dl deadLettered) {
	attrs := []any{slog.String("reason", dl.reason), slog.String("topic", d.rec.Topic),
		slog.Int("partition", int(d.rec.Partition)), slog.Int64("offset", d.rec.Offset), slog.Any("err", dl.cause)}
	if dl.truncated {
		l.log.WarnContext(ctx, "dead-letter copy refused as too large: wrote a truncated copy", append(attrs,
			slog.String("dlq_topic", dl.dlqTopic), slog.Int("value_bytes", len(d.rec.Value)))...)
		return
	}
	l.log.WarnContext(ctx, "dead-lettered", attrs...)
}

func (l logObserver) observePause(cause error) {
	l.log.Warn("redis unreachable: fetching paused", slog.Any("err", cause))
}

func (l logObserver) observeResume(paused time.Duration) {
	l.log.Info("redis answers again: fetching resumed", slog.Duration("paused", paused))
}
