package chaos

import (
	"context"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/leasehold/leasehold/internal/testkit"
)

// TestWorkerFaultDeferred: a worker fault that cannot be carried out at its
// time (another fault holds the workers) is retried until it can, not
// dropped; one that never can is given up at the deadline, and the log says
// which happened.
func TestWorkerFaultDeferred(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name     string
		busyFor  int // tries that find no worker
		deadline time.Duration
		tries    int
		logs     []string
		notLogs  []string
	}{
		{"carried out at once", 0, time.Minute, 1, nil, []string{"deferred", "skipped"}},
		{"deferred, then carried out", 3, time.Minute, 4, []string{"deferred"}, []string{"skipped"}},
		{"given up at the deadline", 1 << 30, 600 * time.Millisecond, -1, []string{"deferred", "skipped"}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			out := &testkit.LogSink{}
			log := slog.New(out)
			r := &run{deferUntil: time.Now().Add(tc.deadline)}
			var mu sync.Mutex
			tries := 0
			done := make(chan struct{})
			try := func(context.Context, Event, *slog.Logger) string {
				mu.Lock()
				defer mu.Unlock()
				tries++
				if tries <= tc.busyFor {
					return "no idle worker"
				}
				close(done)
				return ""
			}
			r.workerFault(t.Context(), Event{Action: Pause}, log, try)
			r.faults.Wait()
			mu.Lock()
			got := tries
			mu.Unlock()
			if tc.tries >= 0 && got != tc.tries {
				t.Errorf("tries = %d, want %d", got, tc.tries)
			}
			select {
			case <-done:
				if tc.tries < 0 {
					t.Error("a fault that never could was carried out")
				}
			default:
				if tc.tries >= 0 {
					t.Error("the fault was not carried out")
				}
			}
			for _, want := range tc.logs {
				if !out.Has(want) {
					t.Errorf("no %q logged", want)
				}
			}
			for _, not := range tc.notLogs {
				if out.Has(not) {
					t.Errorf("%q logged", not)
				}
			}
		})
	}
}
