package main

import (
	"context"
	"fmt"
	"log"
	"sync/atomic"
	"time"

	"github.com/hibiken/asynq"
	"github.com/redis/go-redis/v9"
	"golang.org/x/sync/errgroup"
)

// asynqEnqueue enqueues n distinct no-op tasks, each with asynq's
// idempotency: TaskID (a duplicate ID is refused while the task exists) and
// Unique (a lock on type and payload for ttl).
func asynqEnqueue(ctx context.Context, addr, typ string, run, n int, unique time.Duration) error {
	cl := asynq.NewClient(asynq.RedisClientOpt{Addr: addr, PoolSize: 32})
	defer func() { _ = cl.Close() }()
	var g errgroup.Group
	g.SetLimit(16)
	for i := range n {
		g.Go(func() error {
			key := fmt.Sprintf("aq%d-%d", run, i)
			t := asynq.NewTask(typ, []byte(`{"key":"`+key+`"}`))
			_, err := cl.EnqueueContext(ctx, t, asynq.TaskID(key), asynq.Unique(unique), asynq.MaxRetry(3))
			return err
		})
	}
	return g.Wait()
}

// asynqServer starts a server of concurrency conc running h for typ.
func asynqServer(addr string, conc int, typ string, h asynq.HandlerFunc) (*asynq.Server, error) {
	srv := asynq.NewServer(asynq.RedisClientOpt{Addr: addr, PoolSize: conc + 16}, asynq.Config{
		Concurrency:     conc,
		Logger:          quietLogger{},
		ShutdownTimeout: 30 * time.Second,
	})
	mux := asynq.NewServeMux()
	mux.Handle(typ, h)
	if err := srv.Start(mux); err != nil {
		return nil, err
	}
	return srv, nil
}

// asynqRun processes n no-op tasks with a server of concurrency conc and
// measures between warm and n tasks processed.
func asynqRun(ctx context.Context, rdb *redis.Client, addr string, run, n, warm, conc int) (window, error) {
	if err := asynqEnqueue(ctx, addr, "bench:noop", run, n, 24*time.Hour); err != nil {
		return window{}, err
	}
	var processed atomic.Int64
	srv, err := asynqServer(addr, conc, "bench:noop", func(context.Context, *asynq.Task) error {
		processed.Add(1)
		return nil
	})
	if err != nil {
		return window{}, err
	}
	defer srv.Shutdown()
	return steady(ctx, rdb, processed.Load, int64(warm), int64(n), 10*time.Minute)
}

// quietLogger drops asynq's logs but its fatal ones.
type quietLogger struct{}

func (quietLogger) Debug(...any) {}
func (quietLogger) Info(...any)  {}
func (quietLogger) Warn(...any)  {}
func (quietLogger) Error(...any) {}
func (quietLogger) Fatal(args ...any) {
	log.Fatal(args...)
}

var _ asynq.Logger = quietLogger{}
