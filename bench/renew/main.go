// Command renew compares renewing 10,000 held leases with leasehold's renewer
// (one pipelined round per renew interval) against go-redsync's
// Mutex.ExtendContext on 10,000 mutexes (one round trip per lock), on the same
// Redis, and measures how soon a stolen lease is noticed. It prints one
// figure a line, name=value unit.
//
//	go run ./bench/renew [-n 10000] [-addr host:port]
//
// Without -addr it starts its own redis-server (on a free port, persisting
// nothing) so that other clients of a shared server do not skew the figures;
// with -addr it works under its own random key prefix and deletes its keys at
// the end.
package main

import (
	"context"
	"crypto/rand"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"math"
	mrand "math/rand/v2"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-redsync/redsync/v4"
	"github.com/go-redsync/redsync/v4/redis/goredis/v9"
	"github.com/redis/go-redis/v9"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"

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
	flag.Parse()
	if err := bench(*addr, *n, *ttl, *rounds, *steals); err != nil {
		fmt.Fprintln(os.Stderr, "renew:", err)
		os.Exit(1)
	}
}

var renewBatch, renewParallel int

func bench(addr string, n int, ttl time.Duration, rounds, steals int) error {
	if addr == "" {
		a, stop, err := startRedis()
		if err != nil {
			return err
		}
		defer stop()
		addr = a
	}
	return run(addr, n, ttl, rounds, steals)
}

// startRedis starts a redis-server on a free port of 127.0.0.1 that persists
// nothing, and returns its address and a function that stops it.
func startRedis() (string, func(), error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", nil, err
	}
	port := l.Addr().(*net.TCPAddr).Port
	_ = l.Close()
	dir, err := os.MkdirTemp("", "bench-renew-")
	if err != nil {
		return "", nil, err
	}
	cmd := exec.Command("redis-server", "--port", strconv.Itoa(port), "--bind", "127.0.0.1",
		"--save", "", "--appendonly", "no", "--dir", dir, "--logfile", filepath.Join(dir, "redis.log"))
	if err := cmd.Start(); err != nil {
		return "", nil, fmt.Errorf("start redis-server (is it on PATH?): %w", err)
	}
	stop := func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		_ = os.RemoveAll(dir)
	}
	addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
	c := redis.NewClient(&redis.Options{Addr: addr, MaxRetries: -1})
	defer c.Close()
	for end := time.Now().Add(10 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		if c.Ping(context.Background()).Err() == nil {
			return addr, stop, nil
		}
		if time.Now().After(end) {
			stop()
			return "", nil, fmt.Errorf("redis-server on %s did not answer", addr)
		}
	}
}

// roundTimer records the duration of the renewer's rounds (its lease.renew
// spans) that covered all n leases.
type roundTimer struct {
	n  int
	mu sync.Mutex
	ds []time.Duration
}

func (r *roundTimer) OnStart(context.Context, sdktrace.ReadWriteSpan) {}
func (r *roundTimer) Shutdown(context.Context) error                  { return nil }
func (r *roundTimer) ForceFlush(context.Context) error                { return nil }
func (r *roundTimer) OnEnd(s sdktrace.ReadOnlySpan) {
	if s.Name() != "lease.renew" {
		return
	}
	for _, a := range s.Attributes() {
		if a.Key == "lease.count" && int(a.Value.AsInt64()) == r.n {
			r.mu.Lock()
			r.ds = append(r.ds, s.EndTime().Sub(s.StartTime()))
			r.mu.Unlock()
		}
	}
}

func (r *roundTimer) count() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.ds)
}

func (r *roundTimer) durations() []time.Duration {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.ds)
}

func run(addr string, n int, ttl time.Duration, rounds, steals int) error {
	ctx := context.Background()
	client := redis.NewClient(&redis.Options{Addr: addr, PoolSize: 64})
	defer client.Close()
	if err := client.Ping(ctx).Err(); err != nil {
		return fmt.Errorf("redis at %s: %w", addr, err)
	}
	prefix := "bench:renew:" + strings.ToLower(rand.Text()[:10]) + ":"
	defer func() {
		cctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		if err := deletePrefix(cctx, client, prefix); err != nil {
			fmt.Fprintln(os.Stderr, "renew: cleanup:", err)
		}
	}()

	// leasehold: n leases, one Manager, default renew interval (TTL/3).
	rt := &roundTimer{n: n}
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rt))
	defer tp.Shutdown(ctx)
	m, err := lease.NewManager(client, lease.WithPrefix(prefix+"lh:"), lease.WithTTL(ttl),
		lease.WithTracerProvider(tp), lease.WithLogger(slog.New(slog.DiscardHandler)),
		lease.WithRenewBatch(renewBatch), lease.WithRenewParallelism(renewParallel))
	if err != nil {
		return err
	}
	if err := m.Start(ctx); err != nil {
		return err
	}
	defer m.Shutdown(ctx)
	leases := make([]*lease.Lease, n)
	var lost atomic.Int64
	var stolen sync.Map // *lease.Lease -> struct{}
	if err := parallel(n, 32, func(i int) error {
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
	for rt.count() < rounds {
		time.Sleep(m.RenewInterval() / 4)
	}
	lh := median(rt.durations()[:rounds])

	// go-redsync: n mutexes, each extended with its own ExtendContext call,
	// one after the other, as a single renewer goroutine would.
	// Their expiry is ten TTLs so that taking 10,000 locks on a busy machine
	// does not let the first ones expire before they are extended; the cost
	// of an extend does not depend on it.
	rs := redsync.New(goredis.NewPool(client))
	mus := make([]*redsync.Mutex, n)
	if err := parallel(n, 32, func(i int) error {
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
	rsd := median(rsTimes)
	// The same with 64 goroutines sharing the mutexes, for reference.
	start := time.Now()
	if err := parallel(n, 64, func(i int) error {
		if ok, err := mus[i].ExtendContext(ctx); !ok || err != nil {
			return fmt.Errorf("redsync extend %s: %v, %w", mus[i].Name(), ok, err)
		}
		return nil
	}); err != nil {
		return err
	}
	rsPar := time.Since(start)
	_ = parallel(n, 32, func(i int) error { _, _ = mus[i].UnlockContext(ctx); return nil })

	// Loss detection: steal leases (overwrite their owner) at random moments
	// over three renew intervals; each watcher times steal -> Done.
	perm := mrand.Perm(n)[:min(steals, n)]
	window := 3 * m.RenewInterval()
	lat := make([]time.Duration, len(perm))
	if err := parallel(len(perm), len(perm), func(k int) error {
		l := leases[perm[k]]
		time.Sleep(time.Duration(mrand.Int64N(int64(window))))
		stolen.Store(l, struct{}{})
		at := time.Now()
		if err := client.HSet(ctx, m.Key(l.Name()), "tok", "thief").Err(); err != nil {
			return err
		}
		select {
		case <-l.Done():
			lat[k] = time.Since(at)
		case <-time.After(ttl):
			return fmt.Errorf("stolen lease %s not noticed within the TTL", l.Name())
		}
		if !errors.Is(l.Err(), lease.ErrStolen) {
			return fmt.Errorf("stolen lease %s ended with %v", l.Name(), l.Err())
		}
		return nil
	}); err != nil {
		return err
	}
	slices.Sort(lat)

	ms := func(d time.Duration) string { return strconv.FormatFloat(float64(d)/1e6, 'f', 1, 64) }
	fmt.Printf("renew_10k_leasehold_ms=%s ms\n", ms(lh))
	fmt.Printf("renew_10k_redsync_ms=%s ms\n", ms(rsd))
	fmt.Printf("renew_10k_redsync_64goroutines_ms=%s ms\n", ms(rsPar))
	fmt.Printf("renew_10k_speedup_vs_redsync=%.1f x\n", float64(rsd)/float64(lh))
	fmt.Printf("renew_10k_leasehold_min_ms=%s ms\n", ms(slices.Min(rt.durations()[:rounds])))
	fmt.Printf("renew_10k_redsync_min_ms=%s ms\n", ms(slices.Min(rsTimes)))
	fmt.Printf("leases_lost_during_bench=%d leases\n", lost.Load())
	fmt.Printf("lost_detect_p50_ms=%s ms\n", ms(pct(lat, 0.50)))
	fmt.Printf("lost_detect_p99_ms=%s ms\n", ms(pct(lat, 0.99)))
	fmt.Printf("renew_interval_ms=%s ms\n", ms(m.RenewInterval()))
	fmt.Printf("leases_held=%d leases\n", n)
	return nil
}

// parallel runs f(0..n-1) on up to width goroutines and returns the first error.
func parallel(n, width int, f func(i int) error) error {
	var (
		wg    sync.WaitGroup
		next  atomic.Int64
		first atomic.Pointer[error]
	)
	for range min(width, n) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := int(next.Add(1) - 1)
				if i >= n || first.Load() != nil {
					return
				}
				if err := f(i); err != nil {
					first.CompareAndSwap(nil, &err)
					return
				}
			}
		}()
	}
	wg.Wait()
	if p := first.Load(); p != nil {
		return *p
	}
	return nil
}

func median(ds []time.Duration) time.Duration {
	s := slices.Clone(ds)
	slices.Sort(s)
	return s[len(s)/2]
}

func pct(sorted []time.Duration, p float64) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	return sorted[int(math.Ceil(p*float64(len(sorted))))-1]
}

func deletePrefix(ctx context.Context, c *redis.Client, prefix string) error {
	var cursor uint64
	for {
		keys, next, err := c.Scan(ctx, cursor, prefix+"*", 1000).Result()
		if err != nil {
			return err
		}
		if len(keys) > 0 {
			if err := c.Unlink(ctx, keys...).Err(); err != nil {
				return err
			}
		}
		if next == 0 {
			return nil
		}
		cursor = next
	}
}
