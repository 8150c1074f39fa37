// Command renew compares renewing 10,000 held leases with leasehold's renewer
// (one pipelined round per renew interval) against a pipelined PEXPIRE of the
// same 10,000 keys (the floor: no owner check), rounds alternating on the same
// Redis, and against go-redsync's Mutex.ExtendContext on 10,000 mutexes (one
// round trip per lock), and measures how soon a stolen lease is noticed. It
// prints one figure a line, name=value unit: for each side of the PEXPIRE
// comparison the median wall time of a round and its spread, the time Redis
// spent in its commands (INFO commandstats usec; a script's includes the
// commands it calls), the Redis main thread's CPU and this process's CPU in
// the round's window (a renew round's window also holds the idle time before
// it, up to an interval, of which both CPU figures carry a little).
//
//	go run ./bench/renew [-n 10000] [-addr host:port]
//
// Without -addr it starts its own redis-server (on a free port, persisting
// nothing) so that other clients of a shared server do not skew the figures;
// with -addr it works under its own random key prefix and deletes its keys at
// the end.
package main

import (
	"cmp"
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	mrand "math/rand/v2"
	"os"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-redsync/redsync/v4"
	"github.com/go-redsync/redsync/v4/redis/goredis/v9"
	"github.com/redis/go-redis/v9"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"

	"github.com/leasehold/leasehold/internal/benchkit"
	"github.com/leasehold/leasehold/internal/testkit"
	"github.com/leasehold/leasehold/lease"
)

func main() {
	addr := flag.String("addr", os.Getenv("REDIS_ADDR"), "Redis address (default: start a private redis-server)")
	n := flag.Int("n", 10000, "leases (and mutexes) held")
	ttl := flag.Duration("ttl", 3*time.Second, "lease and mutex TTL")
	rounds := flag.Int("rounds", 5, "renew rounds measured (median reported)")
	steals := flag.Int("steals", 300, "leases stolen to measure loss detection")
	flag.IntVar(&renewBatch, "batch", 0, "leases a renew batch (0: the Manager's default)")
	flag.IntVar(&renewParallel, "parallel", 0, "renew batches in flight (0: the Manager's default)")
	flag.BoolVar(&scriptPath, "script", false, "renew with the renew script (lease_renew.lua), as on a server without GETEX, instead of the plain command")
	flag.BoolVar(&prototype, "prototype", false, "also renew 10,000 keys of their own with renew_onefield.lua (owner and fence in one field, one TTL a call), alternating with the others")
	flag.StringVar(&cpuProfile, "cpuprofile", "", "write a CPU profile of the side-by-side rounds (renewer and PEXPIRE) to this file")
	flag.Parse()
	if err := bench(*addr, *n, *ttl, *rounds, *steals); err != nil {
		fmt.Fprintln(os.Stderr, "renew:", err)
		os.Exit(1)
	}
}

var (
	renewBatch, renewParallel int
	cpuProfile                string
	prototype, scriptPath     bool
)

func bench(addr string, n int, ttl time.Duration, rounds, steals int) error {
	addr, stop, err := benchkit.RedisAddr(addr)
	if err != nil {
		return err
	}
	defer stop()
	return run(addr, n, ttl, rounds, steals)
}

func run(addr string, n int, ttl time.Duration, rounds, steals int) error {
	ctx := context.Background()
	client := redis.NewClient(&redis.Options{Addr: addr, PoolSize: 64})
	defer func() { _ = client.Close() }()
	if err := client.Ping(ctx).Err(); err != nil {
		return fmt.Errorf("redis at %s: %w", addr, err)
	}
	prefix := benchkit.KeyPrefix("bench:renew:")
	defer func() {
		cctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		if err := testkit.DeletePrefix(cctx, client, prefix); err != nil {
			fmt.Fprintln(os.Stderr, "renew: cleanup:", err)
		}
	}()

	// leasehold: n leases, one Manager, default renew interval (TTL/3).
	rt := benchkit.NewRoundTimer(n)
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rt))
	defer func() { _ = tp.Shutdown(ctx) }()
	backend := lease.NewRedisBackend(client, prefix+"lh:")
	if scriptPath {
		// Without Check, the backend keeps the renew script (lease_renew.lua),
		// as on a server without GETEX.
		backend = struct{ lease.Backend }{backend}
	}
	m, err := lease.NewManagerWithBackend(backend, lease.WithTTL(ttl),
		lease.WithTracerProvider(tp), lease.WithLogger(slog.New(slog.DiscardHandler)),
		lease.WithRenewBatch(renewBatch), lease.WithRenewParallelism(renewParallel))
	if err != nil {
		return err
	}
	if err := m.Start(ctx); err != nil {
		return err
	}
	defer func() { _ = m.Shutdown(ctx) }()
	leases := make([]*lease.Lease, n)
	var lost atomic.Int64
	var stolen sync.Map // *lease.Lease -> struct{}
	if err := benchkit.Parallel(n, 32, func(i int) error {
		l, err := m.Acquire(ctx, "l"+strconv.Itoa(i))
		if err != nil {
			return err
		}
		l.OnLost(func(error) {
			if _, ok := stolen.Load(l); !ok {
				lost.Add(1)
			}
		})
		leases[i] = l
		return nil
	}); err != nil {
		return fmt.Errorf("acquire: %w", err)
	}
	// The renewer's rounds alternate with pipelined PEXPIRE rounds of the
	// same keys, after one renew round for warm-up.
	for rt.Rounds() < 1 {
		time.Sleep(m.RenewInterval() / 4)
	}
	keys := make([]string, n)
	for i, l := range leases {
		keys[i] = m.Key(l.Name())
	}
	// The PEXPIRE rounds take the Manager's batching: its defaults (1000 a
	// batch, 4 in flight) unless -batch and -parallel set them.
	stopProfile, err := startProfile(cpuProfile)
	if err != nil {
		return err
	}
	var proto *onefield
	if prototype {
		if proto, err = newOnefield(ctx, client, prefix, n, 10*ttl); err != nil {
			return fmt.Errorf("prototype: %w", err)
		}
	}
	lhSides, pxSides, prSides, err := sideBySide(ctx, client, rt, keys, ttl, cmp.Or(renewBatch, 1000), cmp.Or(renewParallel, 4), rounds, proto)
	stopProfile()
	if err != nil {
		return fmt.Errorf("side by side: %w", err)
	}
	lh := medianOf(lhSides, func(s side) time.Duration { return s.wall })

	// go-redsync: n mutexes, each extended with its own ExtendContext call,
	// one after the other, as a single renewer goroutine would.
	// Their expiry is ten TTLs so that taking 10,000 locks on a busy machine
	// does not let the first ones expire before they are extended; the cost
	// of an extend does not depend on it.
	rs := redsync.New(goredis.NewPool(client))
	mus := make([]*redsync.Mutex, n)
	if err := benchkit.Parallel(n, 32, func(i int) error {
		mu := rs.NewMutex(prefix+"rs:"+strconv.Itoa(i), redsync.WithExpiry(10*ttl), redsync.WithTries(1))
		mus[i] = mu
		return mu.LockContext(ctx)
	}); err != nil {
		return fmt.Errorf("redsync lock: %w", err)
	}
	var rsTimes []time.Duration
	for range rounds {
		start := time.Now()
		for _, mu := range mus {
			if ok, err := mu.ExtendContext(ctx); !ok || err != nil {
				return fmt.Errorf("redsync extend %s: %v, %w", mu.Name(), ok, err)
			}
		}
		rsTimes = append(rsTimes, time.Since(start))
	}
	rsd := benchkit.Median(rsTimes)
	// The same with 64 goroutines sharing the mutexes, for reference.
	start := time.Now()
	if err := benchkit.Parallel(n, 64, func(i int) error {
		if ok, err := mus[i].ExtendContext(ctx); !ok || err != nil {
			return fmt.Errorf("redsync extend %s: %v, %w", mus[i].Name(), ok, err)
		}
		return nil
	}); err != nil {
		return err
	}
	rsPar := time.Since(start)
	_ = benchkit.Parallel(n, 32, func(i int) error { _, _ = mus[i].UnlockContext(ctx); return nil })

	// Loss detection: steal leases (overwrite their owner) at random moments
	// over three renew intervals; each watcher times steal -> Done.
	perm := mrand.Perm(n)[:min(steals, n)]
	window := 3 * m.RenewInterval()
	lat := make([]time.Duration, len(perm))
	if err := benchkit.Parallel(len(perm), len(perm), func(k int) error {
		l := leases[perm[k]]
		time.Sleep(time.Duration(mrand.Int64N(int64(window))))
		stolen.Store(l, struct{}{})
		at := time.Now()
		if err := client.Do(ctx, "set", m.Key(l.Name()), "thief 1 60000", "keepttl").Err(); err != nil {
			return err
		}
		select {
		case <-l.Done():
			lat[k] = time.Since(at)
		case <-time.After(ttl):
			return fmt.Errorf("stolen lease %s not noticed within the TTL", l.Name())
		}
		if !errors.Is(l.Err(), lease.ErrStolen) {
			return fmt.Errorf("stolen lease %s ended with %w", l.Name(), l.Err())
		}
		return nil
	}); err != nil {
		return err
	}

	fig := benchkit.NewFigures(os.Stdout)
	printSides(fig, lhSides, pxSides, prSides)
	fig.Millis("renew_10k_redsync_ms", rsd)
	fig.Millis("renew_10k_redsync_64goroutines_ms", rsPar)
	fig.Float("renew_10k_speedup_vs_redsync", float64(rsd)/float64(lh), 1, "x")
	fig.Millis("renew_10k_redsync_min_ms", slices.Min(rsTimes))
	fig.Int("leases_lost_during_bench", lost.Load(), "leases")
	fig.Millis("lost_detect_p50_ms", benchkit.Percentile(lat, 50))
	fig.Millis("lost_detect_p99_ms", benchkit.Percentile(lat, 99))
	fig.Millis("renew_interval_ms", m.RenewInterval())
	fig.Int("leases_held", int64(n), "leases")
	return fig.Err()
}
