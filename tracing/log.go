package tracing

import (
	"context"
	"log/slog"

	"go.opentelemetry.io/otel/trace"
)

// Log attribute keys of the span a log line was written under.
const (
	LogTraceID = "trace_id"
	LogSpanID  = "span_id"
)

// NewLogHandler wraps h so that every record logged with a context that
// carries a valid span (logger.InfoContext(ctx, ...)) gets that span's
// trace_id and span_id attributes, as hex strings that Jaeger's search and
// Grafana's trace links take. Records logged without a context, or under no
// span, pass through unchanged. Wrapping a handler twice adds the IDs once.
//
// Inside a leasehold job handler, log with the context the handler was given:
//
//	logger := slog.New(tracing.NewLogHandler(slog.NewJSONHandler(os.Stderr, nil)))
//	func(ctx context.Context, j *leasehold.Job) ([]byte, error) {
//		logger.InfoContext(ctx, "transcoding", slog.Int("frames", n)) // trace_id=... span_id=...
//		...
//	}
func NewLogHandler(h slog.Handler) slog.Handler {
	if lh, ok := h.(*logHandler); ok {
		return lh
	}
	return &logHandler{h: h}
}

// NewLogHandlerWithSpan is [NewLogHandler] with a fallback: records logged
// without a span in their context get the IDs of sc. The worker uses it for
// [github.com/leasehold/leasehold.Job.Logger], so that lines a handler logs
// without its context still carry the job span's IDs.
func NewLogHandlerWithSpan(h slog.Handler, sc trace.SpanContext) slog.Handler {
	if lh, ok := h.(*logHandler); ok {
		h = lh.h
	}
	return &logHandler{h: h, fallback: sc}
}

type logHandler struct {
	h        slog.Handler
	fallback trace.SpanContext
}

func (l *logHandler) Enabled(ctx context.Context, level slog.Level) bool {
	return l.h.Enabled(ctx, level)
}

func (l *logHandler) Handle(ctx context.Context, r slog.Record) error {
	sc := l.fallback
	if ctx != nil {
		if s := trace.SpanContextFromContext(ctx); s.IsValid() {
			sc = s
		}
	}
	if sc.IsValid() {
		r = r.Clone()
		r.AddAttrs(slog.String(LogTraceID, sc.TraceID().String()), slog.String(LogSpanID, sc.SpanID().String()))
	}
	return l.h.Handle(ctx, r)
}

func (l *logHandler) WithAttrs(attrs []slog.Attr) slog.Handler {
	return &logHandler{h: l.h.WithAttrs(attrs), fallback: l.fallback}
}

func (l *logHandler) WithGroup(name string) slog.Handler {
	return &logHandler{h: l.h.WithGroup(name), fallback: l.fallback}
}
