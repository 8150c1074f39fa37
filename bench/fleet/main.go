// Command fleet measures what the fleet's status costs Redis: it starts its
// own redis-server, runs -workers publishers (internal/fleet, as `worker
// run` does) at the default renew interval (lease TTL / 3) for -span, and
// prints, one figure a line (name=value unit): the commands and bytes
// (received plus sent by Redis, from INFO commandstats and INFO stats
// deltas) per worker per minute; MEMORY USAGE of a worker's status, of a
// full hour's series (60 samples) and of the index; and what one `worker
// fleet` (or console poll) read of the whole fleet costs. The status holds
// counts, not jobs: its size does not grow with the running jobs (-running
// sets the count it reports).
//
//	go run ./bench/fleet [-workers 10] [-span 60s] [-running 10000]
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/leasehold/leasehold"
	"github.com/leasehold/leasehold/internal/benchkit"
	"github.com/leasehold/leasehold/internal/fleet"
)

func main() {
	workers := flag.Int("workers", 10, "publishers")
	span := flag.Duration("span", time.Minute, "how long they publish")
	running := flag.Int("running", 10000, "running jobs each publisher reports (the status holds the count)")
	flag.Parse()
	if err := run(*workers, *span, *running); err != nil {
		fmt.Fprintln(os.Stderr, "bench/fleet:", err)
		os.Exit(1)
	}
}

const prefix = "lh:"

func run(workers int, span time.Duration, running int) error {
	srv, err := benchkit.StartRedis("")
	if err != nil {
		return err
	}
	defer srv.Stop()
	ctx := context.Background()
	rdb := redis.NewClient(&redis.Options{Addr: srv.Addr()})
	defer func() { _ = rdb.Close() }()
	f := benchkit.NewFigures(os.Stdout)
	interval := leasehold.DefaultLeaseTTL / 3
	load := fleet.Load{Running: running, LeasesHeld: running, Counters: fleet.Counters{Succeeded: 123456789,
		Failed: 12345, Retried: 12345, DeadLettered: 1234, Duplicates: 123456, Takeovers: 1234, LeasesLost: 123}}
	before, err := snapshot(ctx, rdb)
	if err != nil {
		return err
	}
	pubs := make([]*fleet.Publisher, workers)
	for i := range pubs {
		pubs[i], err = fleet.NewPublisher(fleet.Config{Redis: rdb, Prefix: prefix, Interval: interval,
			Identity: fleet.Identity{Host: "worker-" + strconv.Itoa(i) + ".payments.svc.cluster.local", Version: "v1.4.2",
				Topics: []string{"leasehold.jobs"}, Group: "leasehold", Concurrency: 64},
			Load: func() fleet.Load { return load }})
		if err != nil {
			return err
		}
		if err := pubs[i].Start(ctx); err != nil {
			return err
		}
	}
	time.Sleep(span)
	after, err := snapshot(ctx, rdb)
	if err != nil {
		return err
	}
	perMin := float64(workers) * span.Minutes()
	f.Int("fleet_publish_interval_ms", interval.Milliseconds(), "ms")
	d := after.since(before)
	f.Float("fleet_commands_per_worker_minute", float64(d.calls)/perMin, 1, "commands")
	f.Float("fleet_bytes_per_worker_minute", float64(d.net)/perMin, 0, "bytes")
	if err := memory(ctx, rdb, f, pubs[0].ID(), load); err != nil {
		return err
	}
	if err := readCost(ctx, rdb, f, workers); err != nil {
		return err
	}
	for _, p := range pubs {
		_ = p.Shutdown(ctx)
	}
	return f.Err()
}

// memory prints MEMORY USAGE of a worker's keys, its series filled to the
// hour.
func memory(ctx context.Context, rdb *redis.Client, f *benchkit.Figures, id string, load fleet.Load) error {
	sk := prefix + "fleet:s:" + id
	for rdb.LLen(ctx, sk).Val() < fleet.MaxSamples {
		b, _ := json.Marshal(fleet.Sample{At: time.Now().UTC(), Load: load})
		if err := rdb.LPush(ctx, sk, b).Err(); err != nil {
			return err
		}
	}
	for _, k := range []struct{ name, key string }{
		{"fleet_status_bytes", prefix + "fleet:w:" + id},
		{"fleet_series_hour_bytes", sk},
		{"fleet_index_bytes", prefix + "fleet:workers"},
	} {
		n, err := rdb.MemoryUsage(ctx, k.key).Result()
		if err != nil {
			return fmt.Errorf("memory usage %s: %w", k.key, err)
		}
		f.Int(k.name, n, "bytes")
	}
	return nil
}

// readCost prints the commands and bytes of one read of the fleet.
func readCost(ctx context.Context, rdb *redis.Client, f *benchkit.Figures, workers int) error {
	before, err := snapshot(ctx, rdb)
	if err != nil {
		return err
	}
	v, err := fleet.Read(ctx, rdb, prefix, fleet.MaxSamples)
	if err != nil {
		return err
	}
	if len(v.Workers) != workers {
		return fmt.Errorf("read %d workers, want %d", len(v.Workers), workers)
	}
	after, err := snapshot(ctx, rdb)
	if err != nil {
		return err
	}
	d := after.since(before)
	f.Int("fleet_read_commands", d.calls, "commands")
	f.Int("fleet_read_bytes", d.net, "bytes")
	return nil
}

type counts struct{ calls, net, info int64 }

// snapshot reads the calls of every command except INFO itself, and the
// bytes Redis received and sent, from INFO, less what the INFO before it
// took (measured by reading INFO twice).
func snapshot(ctx context.Context, rdb *redis.Client) (counts, error) {
	a, err := info(ctx, rdb)
	if err != nil {
		return counts{}, err
	}
	b, err := info(ctx, rdb)
	if err != nil {
		return counts{}, err
	}
	b.info = b.net - a.net // one INFO exchange
	return b, nil
}

// since returns what ran between snapshots c0 and c: less the two INFO
// exchanges (c0's second, c's first) that fall between their readings.
func (c counts) since(c0 counts) counts {
	return counts{calls: c.calls - c0.calls, net: c.net - c0.net - 2*c.info}
}

func info(ctx context.Context, rdb *redis.Client) (counts, error) {
	info, err := rdb.Info(ctx, "commandstats", "stats").Result()
	if err != nil {
		return counts{}, err
	}
	var c counts
	for line := range strings.SplitSeq(info, "\n") {
		line = strings.TrimSpace(line)
		switch {
		case strings.HasPrefix(line, "cmdstat_") && !strings.HasPrefix(line, "cmdstat_info:"):
			_, rest, _ := strings.Cut(line, "calls=")
			n, _ := strconv.ParseInt(strings.SplitN(rest, ",", 2)[0], 10, 64)
			c.calls += n
		case strings.HasPrefix(line, "total_net_input_bytes:"), strings.HasPrefix(line, "total_net_output_bytes:"):
			_, v, _ := strings.Cut(line, ":")
			n, _ := strconv.ParseInt(v, 10, 64)
			c.net += n
		}
	}
	return c, nil
}
