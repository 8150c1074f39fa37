package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"os"
	"runtime/pprof"
	"sync/atomic"
	"time"

	"github.com/hibiken/asynq"
	"github.com/redis/go-redis/v9"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/leasehold/leasehold"
)

// longCfg is the long-job scenario: jobs held at once in one process, each
// running past the measured window.
type longCfg struct {
	jobs      int
	ttl       time.Duration // lease TTL
	heartbeat time.Duration // interval between a job's Heartbeat calls; 0: none
	wakeOnly  bool          // wake every heartbeat interval but call nothing (the handler's own cost)
	warm      time.Duration // after every job started, before the window
	window    time.Duration
	profile   string // write a CPU profile of the window to this file ("": none)
}

// startProfile starts a CPU profile into file (none when file is "") and
// returns the function that stops it.
func startProfile(file string) (func(), error) {
	if file == "" {
		return func() {}, nil
	}
	f, err := os.Create(file) //nolint:gosec // a path the user gave
	if err != nil {
		return nil, err
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		_ = f.Close()
		return nil, err
	}
	return func() { pprof.StopCPUProfile(); _ = f.Close() }, nil
}

// holdJobs waits until running reaches n, then for warm, then measures
// window, then closes stop.
func holdJobs(ctx context.Context, rdb *redis.Client, running *atomic.Int64, c longCfg, stop chan struct{}) (window, error) {
	defer close(stop)
	deadline := time.Now().Add(5 * time.Minute)
	for running.Load() < int64(c.jobs) {
		if time.Now().After(deadline) {
			return window{}, fmt.Errorf("%d of %d long jobs running after 5m", running.Load(), c.jobs)
		}
		time.Sleep(10 * time.Millisecond)
	}
	time.Sleep(c.warm)
	stopProfile, err := startProfile(c.profile)
	if err != nil {
		return window{}, err
	}
	s, err := take(ctx, rdb)
	if err != nil {
		stopProfile()
		return window{}, err
	}
	time.Sleep(c.window)
	e, err := take(ctx, rdb)
	stopProfile()
	return s.to(e), err
}

// leaseholdLong holds c.jobs jobs in one worker (concurrency c.jobs), each
// calling Heartbeat every c.heartbeat from a random phase, so that start
// times are spread as in production. With c.wakeOnly the handlers wake as
// often but call nothing: what the handlers' own timers cost.
func leaseholdLong(ctx context.Context, rdb *redis.Client, run int, c longCfg) (window, error) {
	topic := fmt.Sprintf("compare.long.%d", run)
	b, err := startBroker(ctx, topic, 6, c.jobs, "bench.long", fmt.Sprintf("long%d", run))
	if err != nil {
		return window{}, err
	}
	defer b.stop()
	w, err := leasehold.New(rdb,
		leasehold.WithKafka(kgo.SeedBrokers(b.addrs...)),
		leasehold.WithTopics(topic),
		leasehold.WithGroup(topic),
		leasehold.WithRetention(10*time.Minute),
		leasehold.WithConcurrency(c.jobs),
		leasehold.WithLeaseTTL(c.ttl),
		leasehold.WithLogger(slog.New(slog.NewTextHandler(io.Discard, nil))),
	)
	if err != nil {
		return window{}, err
	}
	var running atomic.Int64
	var progress atomic.Pointer[[]byte] // where a wake-only handler puts its details
	stop := make(chan struct{})
	err = w.Register("bench.long", func(ctx context.Context, j *leasehold.Job) ([]byte, error) {
		running.Add(1)
		var tick <-chan time.Time
		if c.heartbeat > 0 {
			t := time.NewTimer(rand.N(c.heartbeat)) //nolint:gosec // spreading, not security
			defer t.Stop()
			tick = t.C
			for {
				select {
				case <-stop:
					return nil, nil
				case <-ctx.Done():
					return nil, context.Cause(ctx)
				case now := <-tick:
					details := []byte(now.Format(time.RFC3339Nano))
					if c.wakeOnly {
						progress.Store(&details)
					} else if err := j.Heartbeat(ctx, details); err != nil {
						return nil, err
					}
					t.Reset(c.heartbeat)
				}
			}
		}
		select {
		case <-stop:
			return nil, nil
		case <-ctx.Done():
			return nil, context.Cause(ctx)
		}
	})
	if err != nil {
		return window{}, err
	}
	if err := w.Start(ctx); err != nil {
		return window{}, err
	}
	win, err := holdJobs(ctx, rdb, &running, c, stop)
	sctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	if serr := w.Shutdown(sctx); err == nil && serr != nil {
		err = serr
	}
	if lost := w.Stats().LeasesLost; err == nil && lost > 0 {
		err = fmt.Errorf("%d leases lost while held", lost)
	}
	return win, err
}

// asynqLong holds c.jobs asynq tasks in one server of that concurrency
// (asynq extends their leases itself; no heartbeat details).
func asynqLong(ctx context.Context, rdb *redis.Client, addr string, run int, c longCfg) (window, error) {
	if err := asynqEnqueue(ctx, addr, "bench:long", run, c.jobs, 24*time.Hour); err != nil {
		return window{}, err
	}
	var running atomic.Int64
	stop := make(chan struct{})
	srv, err := asynqServer(addr, c.jobs, "bench:long", func(ctx context.Context, _ *asynq.Task) error {
		running.Add(1)
		select {
		case <-stop:
			return nil
		case <-ctx.Done():
			return ctx.Err()
		}
	})
	if err != nil {
		return window{}, err
	}
	defer srv.Shutdown()
	return holdJobs(ctx, rdb, &running, c, stop)
}
