package cli

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/leasehold/leasehold"
)

// /readyz answers from state the process keeps, whatever Redis and Kafka
// are doing: a goroutine checks the worker (fetching not paused, Redis and
// Kafka answer) every readyInterval with a deadline of readyTimeout, and the
// handler reads the outcome of the last check. A check still under way after
// readyTimeout (a hung server whose client does not heed the deadline) makes
// the answer "not ready" at once, without waiting for it.
const (
	readyInterval = time.Second
	readyTimeout  = 800 * time.Millisecond
)

// readiness is the outcome of the worker's last readiness check.
type readiness struct {
	w   *leasehold.Worker
	log *slog.Logger

	mu      sync.Mutex
	err     error     // of the last check that ended
	checked time.Time // when it ended; zero before the first
	since   time.Time // when the check under way began; zero when none is
}

// run checks the worker until ctx ends.
func (r *readiness) run(ctx context.Context) {
	t := time.NewTimer(0)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		r.check(ctx)
		t.Reset(readyInterval)
	}
}

func (r *readiness) check(ctx context.Context) {
	began := time.Now()
	r.mu.Lock()
	r.since = began
	r.mu.Unlock()
	cctx, cancel := context.WithTimeout(ctx, readyTimeout)
	err := r.w.Ready(cctx)
	if err != nil && cctx.Err() != nil {
		// The deadline passed: which of the two was slow, the error may
		// not say (a ping that ran out of time can leave the next one an
		// expired context).
		err = fmt.Errorf("no answer from Redis or Kafka within %s: %w", readyTimeout, err)
	}
	cancel()
	if ctx.Err() != nil {
		return
	}
	r.mu.Lock()
	prev, first := r.err, r.checked.IsZero()
	r.err, r.checked, r.since = err, time.Now(), time.Time{}
	r.mu.Unlock()
	// Log transitions only, with what the check saw.
	switch {
	case err != nil && (prev == nil || first):
		r.log.Warn("not ready", slog.String("error", oneLine(err)), slog.Duration("check_took", time.Since(began)))
	case err == nil && prev != nil:
		r.log.Info("ready again: fetching runs, Redis and Kafka answered", slog.Duration("check_took", time.Since(began)))
	}
}

// state returns why the worker is not ready, or nil.
func (r *readiness) state(now time.Time) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	switch {
	case !r.since.IsZero() && now.Sub(r.since) > readyTimeout:
		return fmt.Errorf("no answer from Redis or Kafka to the readiness check for %s",
			now.Sub(r.since).Round(100*time.Millisecond))
	case r.checked.IsZero():
		return errors.New("the first readiness check is under way")
	}
	return r.err
}
