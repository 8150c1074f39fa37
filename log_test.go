package leasehold

import (
	"context"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/leasehold/leasehold/internal/testkit"
)

// TestKafkaLogLevel: franz-go's own info lines (its group lifecycle) stay
// out of the worker's log by default, while the worker's own info lines
// (partitions assigned) are logged; WithKafkaLogLevel(slog.LevelInfo) lets
// franz-go's lines through.
func TestKafkaLogLevel(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name  string
		level slog.Leveler // nil: the default
		want  bool
	}{
		{"default", nil, false},
		{"info", slog.LevelInfo, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			h := setup(t, 1)
			var buf lockedBuf
			log := slog.New(slog.NewTextHandler(&buf, &slog.HandlerOptions{Level: slog.LevelDebug}))
			opts := []Opt{WithLogger(log)}
			if tc.level != nil {
				opts = append(opts, WithKafkaLogLevel(tc.level))
			}
			w := h.start(t, h.rdb, func(w *Worker) {
				must(t, w.Register("test.noop", func(context.Context, *Job) ([]byte, error) { return nil, nil }))
			}, opts...)
			testkit.Eventually(t, 20*time.Second, "partitions assigned", func() bool {
				return strings.Contains(buf.String(), "partitions assigned")
			})
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()
			must(t, w.Shutdown(ctx))
			// franz-go logs "joining group" before any assignment.
			if got := strings.Contains(buf.String(), "joining group"); got != tc.want {
				t.Errorf("franz-go's \"joining group\" logged: %v, want %v; log:\n%s", got, tc.want, buf.String())
			}
		})
	}
}
