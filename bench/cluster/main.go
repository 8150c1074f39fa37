// Command cluster measures leasehold on a Redis Cluster against a single
// Redis in one run, on the same machine, and the Redlock backend's batched
// renewals. It starts its own servers: a six-node Cluster (three masters,
// three replicas, via redis-cli --cluster create), one single redis-server,
// and three independent masters for Redlock. It prints one figure a line,
// name=value unit:
//
//	single_msgs_per_s        idempotency claim + fenced complete, poll batches of -batch, single node
//	cluster_msgs_per_s       the same on the Cluster (a ClusterClient; scripts grouped per slot and node)
//	renew_10k_cluster_ms     one renewer round over -n leases spread over the Cluster's masters (median)
//	renew_10k_single_ms      the same on the single node, for reference
//	renew_10k_redlock_ms     the same over three Redlock masters (lease/redlock), TTL -redlock-ttl
//	leases_lost_during_bench leases lost while held (must be 0)
//
//	go run ./bench/cluster [-msgs 100000] [-n 10000]
//
// On a machine with fewer cores than Redis processes, the Cluster cannot
// show its scale-out: its three masters share the cores with the client.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/google/uuid"
	"github.com/redis/go-redis/v9"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"

	"github.com/leasehold/leasehold/idempotency"
	"github.com/leasehold/leasehold/internal/testkit"
	"github.com/leasehold/leasehold/lease"
	"github.com/leasehold/leasehold/lease/redlock"
)

func main() {
	msgs := flag.Int("msgs", 100_000, "messages claimed and completed in each throughput run")
	batch := flag.Int("batch", 500, "poll batch size (claims and completes per call)")
	conc := flag.Int("concurrency", 4, "poll batches in flight at once")
	n := flag.Int("n", 10_000, "leases held for the renewal figures")
	ttl := flag.Duration("ttl", 3*time.Second, "lease TTL of the renewal figures")
	rlTTL := flag.Duration("redlock-ttl", 15*time.Second, "lease TTL of the Redlock renewal figure (the library default)")
	rounds := flag.Int("rounds", 3, "renew rounds measured (median reported)")
	flag.Parse()
	if err := run(*msgs, *batch, *conc, *n, *ttl, *rlTTL, *rounds); err != nil {
		fmt.Fprintln(os.Stderr, "cluster:", err)
		os.Exit(1)
	}
}

func run(msgs, batch, conc, n int, ttl, rlTTL time.Duration, rounds int) error {
	ctx := context.Background()
	dir, err := os.MkdirTemp("", "lh-bench-cluster-")
	if err != nil {
		return err
	}
	defer func() { _ = os.RemoveAll(dir) }()

	cl, err := testkit.NewCluster(dir)
	if err != nil {
		return fmt.Errorf("start cluster: %w", err)
	}
	defer func() { _ = cl.Close() }()
	single, err := startRedis(filepath.Join(dir, "single"))
	if err != nil {
		return err
	}
	defer single.stop()

	opts := cl.Options()
	opts.PoolSize = 64
	cc := redis.NewClusterClient(opts)
	defer func() { _ = cc.Close() }()
	sc := redis.NewClient(&redis.Options{Addr: single.addr, PoolSize: 64})
	defer func() { _ = sc.Close() }()

	var lost atomic.Int64
	// Throughput: single first, then Cluster, each on its own servers.
	for _, t := range []struct {
		name string
		c    redis.UniversalClient
	}{{"single", sc}, {"cluster", cc}} {
		rate, err := throughput(ctx, t.c, msgs, batch, conc)
		if err != nil {
			return fmt.Errorf("%s throughput: %w", t.name, err)
		}
		fmt.Printf("%s_msgs_per_s=%.0f msgs/s\n", t.name, rate)
	}

	for _, t := range []struct {
		name string
		c    redis.UniversalClient
	}{{"cluster", cc}, {"single", sc}} {
		d, err := renewRound(ctx, n, ttl, rounds, &lost, func(opts ...lease.Opt) (*lease.Manager, error) {
			return lease.NewManager(t.c, append(opts, lease.WithPrefix("bench:renew:"))...)
		})
		if err != nil {
			return fmt.Errorf("%s renew: %w", t.name, err)
		}
		fmt.Printf("renew_10k_%s_ms=%.1f ms\n", t.name, float64(d)/float64(time.Millisecond))
	}

	// Redlock over three independent masters.
	var masters []redis.UniversalClient
	for i := range 3 {
		s, err := startRedis(filepath.Join(dir, "redlock"+strconv.Itoa(i)))
		if err != nil {
			return err
		}
		defer s.stop()
		c := redis.NewClient(&redis.Options{Addr: s.addr, PoolSize: 64})
		defer func() { _ = c.Close() }()
		masters = append(masters, c)
	}
	b, err := redlock.New(masters, redlock.WithPrefix("bench:redlock:"))
	if err != nil {
		return err
	}
	// New masters are quarantined for a TTL (Redlock's restart rule).
	wctx, cancel := context.WithTimeout(ctx, 4*rlTTL)
	defer cancel()
	if err := b.WaitReady(wctx, rlTTL); err != nil {
		return err
	}
	d, err := renewRound(ctx, n, rlTTL, rounds, &lost, func(opts ...lease.Opt) (*lease.Manager, error) {
		return lease.NewManagerWithBackend(b, opts...)
	})
	if err != nil {
		return fmt.Errorf("redlock renew: %w", err)
	}
	fmt.Printf("renew_10k_redlock_ms=%.1f ms\n", float64(d)/float64(time.Millisecond))
	fmt.Printf("leases_lost_during_bench=%d leases\n", lost.Load())
	return nil
}

// throughput claims and completes msgs fresh keys through an idempotency
// Store on c, in poll batches of batch, conc batches in flight.
func throughput(ctx context.Context, c redis.UniversalClient, msgs, batch, conc int) (float64, error) {
	prefix := "bench:idem:" + uuid.NewString()[:8] + ":"
	m, err := lease.NewManager(c, lease.WithPrefix(prefix), lease.WithLogger(slog.New(slog.DiscardHandler)))
	if err != nil {
		return 0, err
	}
	if err := m.Start(ctx); err != nil {
		return 0, err
	}
	defer func() { _ = m.Shutdown(ctx) }()
	s, err := idempotency.New(ctx, c, m, idempotency.WithPrefix(prefix))
	if err != nil {
		return 0, err
	}
	// Keys and fingerprints are made before the clock starts, as a
	// producer would have made them.
	var all [][]idempotency.Request
	for i := 0; i < msgs; i += batch {
		reqs := make([]idempotency.Request, 0, batch)
		for range min(batch, msgs-i) {
			k := uuid.NewString()
			f, err := s.Fingerprint([]byte(k))
			if err != nil {
				return 0, err
			}
			reqs = append(reqs, idempotency.Request{Key: k, Fingerprint: f})
		}
		all = append(all, reqs)
	}
	work := make(chan []idempotency.Request, len(all))
	for _, r := range all {
		work <- r
	}
	close(work)
	var (
		wg       sync.WaitGroup
		mu       sync.Mutex
		firstErr error
	)
	start := time.Now()
	for range conc {
		wg.Go(func() {
			for reqs := range work {
				if err := claimComplete(ctx, s, reqs); err != nil {
					mu.Lock()
					if firstErr == nil {
						firstErr = err
					}
					mu.Unlock()
				}
			}
		})
	}
	wg.Wait()
	return float64(msgs) / time.Since(start).Seconds(), firstErr
}

func claimComplete(ctx context.Context, s *idempotency.Store, reqs []idempotency.Request) error {
	claims := s.ClaimBatch(ctx, reqs)
	comps := make([]idempotency.Completion, 0, len(claims))
	for _, c := range claims {
		if c.Outcome != idempotency.Acquired {
			return fmt.Errorf("claim %s: %v: %w", c.Key, c.Outcome, c.Err)
		}
		comps = append(comps, idempotency.Completion{Claim: c})
	}
	for _, err := range s.CompleteBatch(ctx, comps) {
		if err != nil {
			return err
		}
	}
	return nil
}

// renewRound holds n leases on a Manager made by mk and returns the median
// duration of its renewer's rounds over all of them (its lease.renew
// spans). Leases lost meanwhile are counted in lost.
func renewRound(ctx context.Context, n int, ttl time.Duration, rounds int, lost *atomic.Int64,
	mk func(...lease.Opt) (*lease.Manager, error)) (time.Duration, error) {
	rt := &roundTimer{n: n}
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rt))
	defer func() { _ = tp.Shutdown(ctx) }()
	m, err := mk(lease.WithTTL(ttl), lease.WithTracerProvider(tp), lease.WithLogger(slog.New(slog.DiscardHandler)))
	if err != nil {
		return 0, err
	}
	if err := m.Start(ctx); err != nil {
		return 0, err
	}
	defer func() { _ = m.Shutdown(ctx) }()
	run := uuid.NewString()[:8]
	sem := make(chan struct{}, 32)
	var (
		wg       sync.WaitGroup
		mu       sync.Mutex
		firstErr error
	)
	for i := range n {
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			// Setting up, a loaded machine may time a master out: retry.
			var l *lease.Lease
			var err error
			for try := 0; try < 5; try++ {
				if l, err = m.Acquire(ctx, run+"-"+strconv.Itoa(i)); !errors.Is(err, lease.ErrUnavailable) {
					break
				}
				time.Sleep(50 * time.Millisecond)
			}
			if err != nil {
				mu.Lock()
				if firstErr == nil {
					firstErr = err
				}
				mu.Unlock()
				return
			}
			l.OnLost(func(err error) {
				if lost.Add(1) == 1 {
					fmt.Fprintln(os.Stderr, "first lease lost:", err)
				}
			})
		})
	}
	wg.Wait()
	if firstErr != nil {
		return 0, fmt.Errorf("acquire: %w", firstErr)
	}
	deadline := time.Now().Add(time.Duration(rounds+3) * m.RenewInterval() * 2)
	for rt.count() < rounds {
		if time.Now().After(deadline) {
			return 0, fmt.Errorf("only %d full renew rounds of %d leases (held %d, lost %d, rounds seen %v)",
				rt.count(), n, len(m.Held()), lost.Load(), rt.seen())
		}
		time.Sleep(m.RenewInterval() / 4)
	}
	ds := rt.durations()[:rounds]
	slices.Sort(ds)
	return ds[len(ds)/2], nil
}

// roundTimer records the duration of the renewer's rounds (its lease.renew
// spans) that covered all n leases.
type roundTimer struct {
	n   int
	mu  sync.Mutex
	ds  []time.Duration
	all []int
}

func (r *roundTimer) seen() []int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.all)
}

func (r *roundTimer) OnStart(context.Context, sdktrace.ReadWriteSpan) {}
func (r *roundTimer) Shutdown(context.Context) error                  { return nil }
func (r *roundTimer) ForceFlush(context.Context) error                { return nil }
func (r *roundTimer) OnEnd(s sdktrace.ReadOnlySpan) {
	if s.Name() != "lease.renew" {
		return
	}
	for _, a := range s.Attributes() {
		if a.Key == "lease.count" {
			r.mu.Lock()
			r.all = append(r.all, int(a.Value.AsInt64()))
			r.mu.Unlock()
		}
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

type server struct {
	addr string
	cmd  *exec.Cmd
}

// startRedis starts a private redis-server in dir on a free port, with no
// persistence and noeviction.
func startRedis(dir string) (*server, error) {
	if err := os.MkdirAll(dir, 0o750); err != nil {
		return nil, err
	}
	var lc net.ListenConfig
	l, err := lc.Listen(context.Background(), "tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	port := l.Addr().(*net.TCPAddr).Port
	_ = l.Close()
	//nolint:gosec,noctx // a private server in our temp dir, living until stop
	cmd := exec.Command("redis-server", "--bind", "127.0.0.1", "--port", strconv.Itoa(port), "--save", "",
		"--appendonly", "no", "--maxmemory-policy", "noeviction", "--dir", dir,
		"--logfile", filepath.Join(dir, "redis.log"))
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	s := &server{addr: net.JoinHostPort("127.0.0.1", strconv.Itoa(port)), cmd: cmd}
	c := redis.NewClient(&redis.Options{Addr: s.addr, MaxRetries: -1})
	defer func() { _ = c.Close() }()
	for deadline := time.Now().Add(10 * time.Second); ; {
		// The server answering must be ours: another process may have taken
		// the port between the free-port check and our server's bind.
		if info, err := c.Info(context.Background(), "server").Result(); err == nil {
			if !strings.Contains(info, "process_id:"+strconv.Itoa(cmd.Process.Pid)+"\r\n") {
				s.stop()
				return nil, fmt.Errorf("port %d answered by another redis-server", port)
			}
			return s, nil
		} else if time.Now().After(deadline) {
			s.stop()
			return nil, err
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func (s *server) stop() {
	_ = s.cmd.Process.Kill()
	_ = s.cmd.Wait()
}
