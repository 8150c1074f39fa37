package otelsetup

import (
	"errors"
	"log/slog"
	"strings"
	"testing"
	"time"
)

// TestErrorLoggerWarnsOncePerHour: repeats within errorWarnEvery are debug
// lines; the next warning counts them.
func TestErrorLoggerWarnsOncePerHour(t *testing.T) {
	var b strings.Builder
	now := time.Unix(1_800_000_000, 0)
	e := newErrorLogger(slog.New(slog.NewTextHandler(&b, &slog.HandlerOptions{Level: slog.LevelDebug})),
		func() time.Time { return now })
	for range 720 { // an hour of failed exports every 5s
		e.Handle(errors.New("connection refused"))
		now = now.Add(5 * time.Second)
	}
	e.Handle(errors.New("connection refused"))
	lines := strings.Split(strings.TrimSpace(b.String()), "\n")
	var warns []string
	for _, l := range lines {
		if strings.Contains(l, "level=WARN") {
			warns = append(warns, l)
		}
	}
	if len(lines) != 721 || len(warns) != 2 {
		t.Fatalf("%d lines, %d warnings; want 721 lines, 2 warnings", len(lines), len(warns))
	}
	if !strings.Contains(warns[1], "errors_since_last_warning=719") {
		t.Errorf("second warning %q does not count the 719 repeats", warns[1])
	}
}
