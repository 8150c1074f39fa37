package cli

import (
	"context"
	"errors"
	"os"
	"os/signal"
	"sync"
)

// errInterrupted is the cause of the context [NotifySignals] returns when
// the first signal arrives.
var errInterrupted = errors.New("interrupted by a signal")

// NotifySignals returns a context cancelled at the first of sigs (a
// graceful shutdown: running jobs may finish) and a channel closed at the
// second (a forced exit: running jobs are cancelled and their leases
// released). After the second signal the signals are no longer caught, so
// that a third one ends the process the default way. stop releases the
// signals; call it when the command returns.
func NotifySignals(parent context.Context, sigs ...os.Signal) (ctx context.Context, force <-chan struct{}, stop func()) {
	ctx, cancel := context.WithCancelCause(parent)
	ch := make(chan os.Signal, 2)
	signal.Notify(ch, sigs...)
	forced := make(chan struct{})
	done := make(chan struct{})
	go func() {
		select {
		case <-ch:
			cancel(errInterrupted)
		case <-done:
			return
		}
		select {
		case <-ch:
			signal.Stop(ch)
			close(forced)
		case <-done:
		}
	}()
	var once sync.Once
	return ctx, forced, func() {
		once.Do(func() {
			signal.Stop(ch)
			close(done)
			cancel(nil)
		})
	}
}

// untilForced returns a context derived from ctx that is also cancelled
// when force is closed, and its cancel function.
func untilForced(ctx context.Context, force <-chan struct{}) (context.Context, context.CancelFunc) {
	ctx, cancel := context.WithCancel(ctx)
	if force == nil {
		return ctx, cancel
	}
	go func() {
		select {
		case <-force:
			cancel()
		case <-ctx.Done():
		}
	}()
	return ctx, cancel
}
