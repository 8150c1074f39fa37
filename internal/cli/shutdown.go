package cli

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/leasehold/leasehold"
)

// drain shuts the worker down after the first signal: running jobs get
// timeout to finish, the drain's progress (jobs left, time left) is logged,
// and a close of force (the second signal) cancels the jobs still running
// and releases their leases at once. The HTTP server stays up meanwhile (the
// caller stops it afterwards).
func drain(ctx context.Context, force <-chan struct{}, log *slog.Logger, w *leasehold.Worker, timeout time.Duration) error {
	end := time.Now().Add(timeout)
	log.Info("shutting down: running jobs may finish; a second SIGINT or SIGTERM cancels them",
		slog.Int("jobs_left", len(w.Running())), slog.Duration("time_left", timeout))
	// The drain's own deadline is the worker's (timeout); the margin is for
	// the final commit, leaving the group and releasing leases.
	dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), timeout+15*time.Second)
	defer cancel()
	// The second signal cancels dctx from the loop below, after it counted
	// the running jobs: cancelling first would end some before the count.
	dctx, forceStop := context.WithCancel(dctx)
	defer forceStop()

	done := make(chan error, 1)
	go func() { done <- w.Shutdown(dctx) }() //nolint:contextcheck // the drain outlives ctx, which the signal ended
	tick := time.NewTicker(drainLogInterval(timeout))
	defer tick.Stop()
	forceC := force
	cancelled := -1
	for {
		select {
		case err := <-done:
			if cancelled >= 0 {
				return fmt.Errorf("forced exit on a second signal: running jobs cancelled: %d; "+
					"their leases were released and their records will be delivered again", cancelled)
			}
			return err
		case <-forceC:
			forceC = nil
			cancelled = len(w.Running())
			forceStop()
			log.Warn("second signal: cancelling the running jobs and releasing their leases", slog.Int("jobs", cancelled))
		case <-tick.C:
			log.Info("draining", slog.Int("jobs_left", len(w.Running())),
				slog.Duration("time_left", max(time.Until(end), 0).Round(100*time.Millisecond)))
		}
	}
}

// drainLogInterval is how often the drain logs its progress: a tenth of the
// drain, between 1s and 10s.
func drainLogInterval(timeout time.Duration) time.Duration {
	return min(max(timeout/10, time.Second), 10*time.Second)
}
