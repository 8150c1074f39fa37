// Command console measures what an open console page costs the Redis
// server: it starts its own redis-server, holds -n leases (idempotency-key
// lease names) with one lease.Manager (renewed every TTL/3), then measures
// Redis's CPU (INFO cpu: used_cpu_user + used_cpu_sys deltas over wall time)
// for -seconds with nobody looking, and for -seconds again while a client
// polls the console's API as an open page does (the overview and the first
// page of running jobs, every -poll). It prints one figure a line,
// name=value unit; console_redis_cpu_pct is the difference: the console's
// share of one Redis core.
//
//	go run ./bench/console [-n 10000] [-seconds 30] [-poll 2s]
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/leasehold/leasehold"
	"github.com/leasehold/leasehold/console"
	"github.com/leasehold/leasehold/idempotency"
	"github.com/leasehold/leasehold/internal/benchkit"
	"github.com/leasehold/leasehold/lease"
)

func main() {
	n := flag.Int("n", 10000, "leases held")
	seconds := flag.Int("seconds", 30, "length of each measurement, in seconds")
	poll := flag.Duration("poll", console.DefaultPollInterval, "how often the simulated page polls")
	flag.Parse()
	if err := run(*n, time.Duration(*seconds)*time.Second, *poll); err != nil {
		fmt.Fprintln(os.Stderr, "bench/console:", err)
		os.Exit(1)
	}
}

func run(n int, span, poll time.Duration) error {
	srv, err := benchkit.StartRedis("")
	if err != nil {
		return err
	}
	defer srv.Stop()
	ctx := context.Background()
	rdb := redis.NewClient(&redis.Options{Addr: srv.Addr(), PoolSize: 32})
	defer func() { _ = rdb.Close() }()
	const prefix = "lh:"
	m, err := lease.NewManager(rdb, lease.WithPrefix(prefix), lease.WithTTL(leasehold.DefaultLeaseTTL))
	if err != nil {
		return err
	}
	if err := m.Start(ctx); err != nil {
		return err
	}
	defer func() { _ = m.Shutdown(context.Background()) }()
	s, err := idempotency.New(ctx, rdb, m, idempotency.WithPrefix(prefix))
	if err != nil {
		return err
	}
	for i := range n {
		if _, err := m.Acquire(ctx, s.LeaseName("job-"+strconv.Itoa(i))); err != nil {
			return fmt.Errorf("acquire lease %d: %w", i, err)
		}
	}
	held, err := countLeases(ctx, rdb, prefix)
	if err != nil {
		return err
	}
	c, err := console.New(console.Config{Redis: rdb, KeyPrefix: prefix, PollInterval: poll})
	if err != nil {
		return err
	}
	defer func() { _ = c.Close(context.Background()) }()
	hs := httptest.NewServer(c)
	defer hs.Close()

	idle, err := redisCPU(ctx, rdb, span, nil)
	if err != nil {
		return err
	}
	var requests int
	var busy time.Duration
	open, err := redisCPU(ctx, rdb, span, func(stop <-chan struct{}) error {
		t := time.NewTicker(poll)
		defer t.Stop()
		for {
			for _, p := range []string{"/api/overview", "/api/jobs"} {
				start := time.Now()
				if err := get(ctx, hs.URL+p); err != nil {
					return err
				}
				busy += time.Since(start)
				requests++
			}
			select {
			case <-stop:
				return nil
			case <-t.C:
			}
		}
	})
	if err != nil {
		return err
	}
	f := benchkit.NewFigures(os.Stdout)
	f.Int("leases_held", held, "leases")
	f.Millis("poll_interval", poll)
	f.Float("measured_for", span.Seconds(), 0, "s")
	f.Float("redis_cpu_pct_no_console", idle, 3, "%")
	f.Float("redis_cpu_pct_console_open", open, 3, "%")
	f.Float("console_redis_cpu_pct", open-idle, 3, "%")
	f.Int("console_requests", int64(requests), "requests")
	if requests > 0 {
		f.Millis("console_request_mean", busy/time.Duration(requests))
	}
	return f.Err()
}

// redisCPU returns the Redis server's CPU use (user + sys) over span, in
// percent of one core, while load runs (nil: nothing).
func redisCPU(ctx context.Context, rdb *redis.Client, span time.Duration, load func(stop <-chan struct{}) error) (float64, error) {
	c0, err := cpuSeconds(ctx, rdb)
	if err != nil {
		return 0, err
	}
	t0 := time.Now()
	stop := make(chan struct{})
	errc := make(chan error, 1)
	if load != nil {
		go func() { errc <- load(stop) }()
	} else {
		errc <- nil
	}
	time.Sleep(span)
	close(stop)
	if err := <-errc; err != nil {
		return 0, err
	}
	c1, err := cpuSeconds(ctx, rdb)
	if err != nil {
		return 0, err
	}
	return 100 * (c1 - c0) / time.Since(t0).Seconds(), nil
}

func cpuSeconds(ctx context.Context, rdb *redis.Client) (float64, error) {
	info, err := rdb.Info(ctx, "cpu").Result()
	if err != nil {
		return 0, err
	}
	var total float64
	for _, line := range strings.Split(info, "\n") {
		k, v, ok := strings.Cut(strings.TrimSpace(line), ":")
		if ok && (k == "used_cpu_user" || k == "used_cpu_sys") {
			x, err := strconv.ParseFloat(v, 64)
			if err != nil {
				return 0, fmt.Errorf("INFO cpu %s: %w", k, err)
			}
			total += x
		}
	}
	return total, nil
}

func countLeases(ctx context.Context, rdb *redis.Client, prefix string) (int64, error) {
	var n int64
	it := rdb.Scan(ctx, 0, prefix+"lease:*", 1000).Iterator()
	for it.Next(ctx) {
		n++
	}
	return n, it.Err()
}

func get(ctx context.Context, url string) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer func() { _ = resp.Body.Close() }()
	if _, err := io.Copy(io.Discard, resp.Body); err != nil {
		return err
	}
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("GET %s: %s", url, resp.Status)
	}
	return nil
}
