package leasehold

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// TestReadyWhileRunStarts: Ready, Stats and Client called in a loop from
// other goroutines while Run starts and stops the worker, several times, do
// not panic and (under -race) do not race with Run's start.
func TestReadyWhileRunStarts(t *testing.T) {
	t.Parallel()
	h := setup(t, 1)
	noop := func(context.Context, *Job) ([]byte, error) { return nil, nil }
	for round := range 5 {
		w, err := New(h.rdb, h.opts()...)
		must(t, err)
		must(t, w.Register("test.op", noop))
		stop := make(chan struct{})
		var probes sync.WaitGroup
		for range 2 {
			probes.Go(func() {
				for {
					select {
					case <-stop:
						return
					default:
					}
					ctx, cancel := context.WithTimeout(context.Background(), time.Second)
					_ = w.Ready(ctx)
					cancel()
					_ = w.Stats()
					_ = w.Client()
				}
			})
		}
		ctx, cancel := context.WithCancel(context.Background())
		ran := make(chan error, 1)
		go func() { ran <- w.Run(ctx) }()
		select {
		case <-w.Started():
		case err := <-ran:
			t.Fatalf("round %d: Run returned before the worker started: %v", round, err)
		case <-time.After(20 * time.Second):
			t.Fatalf("round %d: the started signal did not come", round)
		}
		rctx, rcancel := context.WithTimeout(context.Background(), 10*time.Second)
		if err := w.Ready(rctx); err != nil {
			t.Errorf("round %d: Ready after the started signal: %v", round, err)
		}
		rcancel()
		if w.Client() == nil {
			t.Errorf("round %d: Client is nil after the started signal", round)
		}
		cancel()
		if err := <-ran; err != nil {
			t.Errorf("round %d: Run: %v", round, err)
		}
		close(stop)
		probes.Wait()
		if err := w.Ready(context.Background()); err == nil {
			t.Errorf("round %d: a stopped worker reports ready", round)
		}
	}
}

// TestReadyNotStarted: before Start, Ready returns the exported
// ErrNotStarted (a probe may wait), after Shutdown ErrClosed.
func TestReadyNotStarted(t *testing.T) {
	rdb := redis.NewClient(&redis.Options{Addr: "127.0.0.1:6379"})
	t.Cleanup(func() { _ = rdb.Close() })
	w, err := New(rdb)
	if err != nil {
		t.Fatal(err)
	}
	if err := w.Ready(context.Background()); !errors.Is(err, ErrNotStarted) {
		t.Errorf("Ready before Start: %v, want ErrNotStarted", err)
	}
	if err := w.Shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
	if err := w.Ready(context.Background()); !errors.Is(err, ErrClosed) || errors.Is(err, ErrNotStarted) {
		t.Errorf("Ready after Shutdown: %v, want ErrClosed", err)
	}
}
