package otelsetup

import (
	"log/slog"
	"sync"
	"time"
)

// errorWarnEvery is how long after a warning OpenTelemetry's internal errors
// are logged at debug level only.
const errorWarnEvery = time.Hour

// errorLogger is the OpenTelemetry error handler Setup installs. An exporter
// that cannot reach its collector reports an error at every export (every 5s
// with the default batch delay): the first is a warning, the repeats within
// errorWarnEvery are debug lines, and the next warning says how many were
// repeated.
type errorLogger struct {
	log *slog.Logger
	now func() time.Time

	mu         sync.Mutex
	warned     time.Time
	suppressed int
}

func newErrorLogger(l *slog.Logger, now func() time.Time) *errorLogger {
	return &errorLogger{log: l, now: now}
}

// Handle implements otel.ErrorHandler.
func (e *errorLogger) Handle(err error) {
	now := e.now()
	e.mu.Lock()
	warn := e.warned.IsZero() || now.Sub(e.warned) >= errorWarnEvery
	repeated := e.suppressed
	if warn {
		e.warned, e.suppressed = now, 0
	} else {
		e.suppressed++
	}
	e.mu.Unlock()
	if !warn {
		e.log.Debug("opentelemetry", slog.Any("err", err))
		return
	}
	attrs := []any{slog.Any("err", err)}
	if repeated > 0 {
		attrs = append(attrs, slog.Int("errors_since_last_warning", repeated))
	}
	e.log.Warn("opentelemetry (repeats within the hour are logged at debug level)", attrs...)
}
