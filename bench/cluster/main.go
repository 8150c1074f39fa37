// Command cluster measures leasehold on a Redis Cluster against a single
// Redis in one run, on the same machine, and the Redlock backend's batched
// renewals. It starts its own servers: a six-node Cluster (three masters,
// three replicas, via redis-cli --cluster create), one single redis-server,
// and three independent masters for Redlock. It prints one figure a line,
// name=value unit:
//
//	single_msgs_per_s        idempotency claim + fenced complete, poll batches of -batch, single node
//	cluster_msgs_per_s       the same on the Cluster (a ClusterClient; scripts grouped per slot and node),
//	                         with the same client budget (-concurrency batches in flight, 64 connections)
//	*_redis_cpu_us_per_msg   Redis CPU per message, all masters together (INFO cpu deltas)
//	*_redis_cpu_us_per_msg_busiest_master  the same on the busiest master: what bounds the rate
//	*_redis_bound_msgs_per_s the rate that CPU allows with one core per master
//	cluster_vs_single_redis_bound  how that bound grows from one master to the Cluster's three
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
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/google/uuid"
	"github.com/redis/go-redis/v9"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"

	"github.com/leasehold/leasehold/idempotency"
	"github.com/leasehold/leasehold/internal/benchkit"
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
	flag.IntVar(&shards, "shards", 0, "idempotency.WithShards of the throughput runs (0: the default)")
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
	single, err := benchkit.StartRedis(filepath.Join(dir, "single"))
	if err != nil {
		return err
	}
	defer single.Stop()

	opts := cl.Options()
	opts.PoolSize = 64
	cc := redis.NewClusterClient(opts)
	defer func() { _ = cc.Close() }()
	sc := redis.NewClient(&redis.Options{Addr: single.Addr(), PoolSize: 64})
	defer func() { _ = sc.Close() }()

	fig := benchkit.NewFigures(os.Stdout)
	var lost atomic.Int64
	var bounds []float64
	// Throughput: single first, then Cluster, each on its own servers.
	for _, t := range []struct {
		name string
		c    redis.UniversalClient
	}{{"single", sc}, {"cluster", cc}} {
		before, err := mastersCPU(ctx, t.c)
		if err != nil {
			return err
		}
		rate, err := throughput(ctx, t.c, msgs, batch, conc)
		if err != nil {
			return fmt.Errorf("%s throughput: %w", t.name, err)
		}
		after, err := mastersCPU(ctx, t.c)
		if err != nil {
			return err
		}
		var total, busiest time.Duration
		for addr, cpu := range after {
			d := cpu - before[addr]
			total += d
			busiest = max(busiest, d)
		}
		perMsg := func(d time.Duration) float64 { return float64(d.Nanoseconds()) / 1e3 / float64(msgs) }
		fig.Float(t.name+"_msgs_per_s", rate, 0, "msgs/s")
		fig.Int(t.name+"_masters", int64(len(after)), "masters")
		fig.Float(t.name+"_redis_cpu_us_per_msg", perMsg(total), 1, "us")
		fig.Float(t.name+"_redis_cpu_us_per_msg_busiest_master", perMsg(busiest), 1, "us")
		bound := 1e6 / perMsg(busiest)
		fig.Float(t.name+"_redis_bound_msgs_per_s", bound, 0, "msgs/s")
		bounds = append(bounds, bound)
	}
	if len(bounds) == 2 {
		fig.Float("cluster_vs_single_redis_bound", bounds[1]/bounds[0], 2, "x")
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
		fig.Millis("renew_10k_"+t.name+"_ms", d)
	}

	// Redlock over three independent masters.
	var masters []redis.UniversalClient
	for i := range 3 {
		s, err := benchkit.StartRedis(filepath.Join(dir, "redlock"+strconv.Itoa(i)))
		if err != nil {
			return err
		}
		defer s.Stop()
		c := redis.NewClient(&redis.Options{Addr: s.Addr(), PoolSize: 64})
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
	fig.Millis("renew_10k_redlock_ms", d)
	fig.Int("leases_lost_during_bench", lost.Load(), "leases")
	return fig.Err()
}

// shards is -shards: the record shards of the throughput runs (0: the Store's default).
var shards int

// mastersCPU returns each master's CPU time so far (INFO cpu, used_cpu_user
// + used_cpu_sys), by address: one entry for a single node.
func mastersCPU(ctx context.Context, c redis.UniversalClient) (map[string]time.Duration, error) {
	out := make(map[string]time.Duration)
	var mu sync.Mutex
	read := func(ctx context.Context, n *redis.Client) error {
		info, err := n.Info(ctx, "cpu").Result()
		if err != nil {
			return err
		}
		var total float64
		for line := range strings.Lines(info) {
			k, v, ok := strings.Cut(strings.TrimSpace(line), ":")
			if ok && (k == "used_cpu_sys" || k == "used_cpu_user") {
				f, err := strconv.ParseFloat(v, 64)
				if err != nil {
					return fmt.Errorf("INFO cpu %s: %w", k, err)
				}
				total += f
			}
		}
		mu.Lock()
		out[n.Options().Addr] = time.Duration(total * float64(time.Second))
		mu.Unlock()
		return nil
	}
	switch c := c.(type) {
	case *redis.ClusterClient:
		return out, c.ForEachMaster(ctx, read)
	case *redis.Client:
		return out, read(ctx, c)
	default:
		return nil, fmt.Errorf("no CPU reading for a %T", c)
	}
}

// throughput claims and completes msgs fresh keys through an idempotency
// Store on c, in poll batches of batch, conc batches in flight.
func throughput(ctx context.Context, c redis.UniversalClient, msgs, batch, conc int) (float64, error) {
	prefix := benchkit.KeyPrefix("bench:idem:")
	m, err := lease.NewManager(c, lease.WithPrefix(prefix), lease.WithLogger(slog.New(slog.DiscardHandler)))
	if err != nil {
		return 0, err
	}
	if err := m.Start(ctx); err != nil {
		return 0, err
	}
	defer func() { _ = m.Shutdown(ctx) }()
	opts := []idempotency.Opt{idempotency.WithPrefix(prefix)}
	if shards > 0 {
		opts = append(opts, idempotency.WithShards(shards))
	}
	s, err := idempotency.New(ctx, c, m, opts...)
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
	start := time.Now()
	err = benchkit.Each(work, conc, func(reqs []idempotency.Request) error {
		return benchkit.ClaimComplete(ctx, s, reqs)
	})
	return float64(msgs) / time.Since(start).Seconds(), err
}

// renewRound holds n leases on a Manager made by mk and returns the median
// duration of its renewer's rounds over all of them (its lease.renew
// spans). Leases lost meanwhile are counted in lost.
func renewRound(ctx context.Context, n int, ttl time.Duration, rounds int, lost *atomic.Int64,
	mk func(...lease.Opt) (*lease.Manager, error)) (time.Duration, error) {
	rt := benchkit.NewRoundTimer(n)
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
	if err := benchkit.Parallel(n, 32, func(i int) error {
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
			return err
		}
		l.OnLost(func(err error) {
			if lost.Add(1) == 1 {
				fmt.Fprintln(os.Stderr, "first lease lost:", err)
			}
		})
		return nil
	}); err != nil {
		return 0, fmt.Errorf("acquire: %w", err)
	}
	deadline := time.Now().Add(time.Duration(rounds+3) * m.RenewInterval() * 2)
	for rt.Rounds() < rounds {
		if time.Now().After(deadline) {
			return 0, fmt.Errorf("only %d full renew rounds of %d leases (held %d, lost %d, rounds seen %v)",
				rt.Rounds(), n, len(m.Held()), lost.Load(), rt.Counts())
		}
		time.Sleep(m.RenewInterval() / 4)
	}
	return benchkit.Median(rt.Durations()[:rounds]), nil
}
