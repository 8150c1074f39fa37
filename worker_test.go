package leasehold

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

func TestNewAndRegisterValidate(t *testing.T) {
	t.Parallel()
	rdb := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1"})
	t.Cleanup(func() { _ = rdb.Close() })
	if _, err := New(rdb, WithTopics("a"), WithDeadLetterTopic("a")); err == nil {
		t.Error("New accepted a dead-letter topic that is also consumed")
	}
	if _, err := New(nil); err == nil {
		t.Error("New accepted a nil Redis client")
	}
	w, err := New(rdb)
	if err != nil {
		t.Fatal(err)
	}
	noop := func(context.Context, *Job) ([]byte, error) { return nil, nil }
	if err := w.Register("bad type", noop); !errors.Is(err, ErrInvalidJobType) {
		t.Errorf("Register(bad type): %v", err)
	}
	if err := w.Register("t", noop); err != nil {
		t.Fatal(err)
	}
	if err := w.Register("t", noop); !errors.Is(err, ErrDuplicateType) {
		t.Errorf("second Register: %v", err)
	}
	if err := w.Register("u", noop, WithMaxAttempts(0)); err == nil {
		t.Error("Register accepted zero attempts")
	}
}

// TestStartFailsCleanly: a worker whose Redis does not answer fails to start,
// holds nothing, and shuts down without error.
func TestStartFailsCleanly(t *testing.T) {
	t.Parallel()
	rdb := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1", DialTimeout: 100 * time.Millisecond, MaxRetries: -1})
	t.Cleanup(func() { _ = rdb.Close() })
	w, err := New(rdb)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := w.Start(ctx); !errors.Is(err, ErrNoHandlers) {
		t.Errorf("Start without handlers: %v", err)
	}
	must(t, w.Register("t", func(context.Context, *Job) ([]byte, error) { return nil, nil }))
	if err := w.Start(ctx); err == nil {
		t.Fatal("Start succeeded against an unreachable Redis")
	}
	if err := w.Ready(ctx); err == nil {
		t.Error("a worker that failed to start reports ready")
	}
	if err := w.Shutdown(ctx); err != nil {
		t.Errorf("Shutdown after a failed start: %v", err)
	}
	if err := w.Start(ctx); !errors.Is(err, ErrClosed) {
		t.Errorf("Start after Shutdown: %v", err)
	}
}
