// Command chaos runs the leasehold chaos suite: real worker processes,
// Redis with its append-only file, a Kafka dev broker (or, with
// CHAOS_KAFKA=apache, a real Apache Kafka broker that is killed, restarted
// and paused too), the payment stub and PostgreSQL, with SIGKILLs, SIGSTOP
// zombies, a Redis restart, rebalances and network partitions of workers
// from a seeded schedule, and checks the workers' history of Redis operations
// and fenced writes against a model of the record (Porcupine); with
// SOAK_DURATION (`make soak`) it runs for that long and checks that memory,
// goroutines and Redis keys stay flat. It prints
// the seed first (on stderr, with the progress log), then one figure a line
// on stdout, and exits 1 when a must-be-zero figure is not zero (2, printing
// only the seed, when the run could not be carried out or was interrupted).
// `make chaos` runs it; settings come from flags or from the CHAOS_*
// environment variables (see -h).
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"syscall"

	"github.com/redis/go-redis/v9"

	"github.com/leasehold/leasehold/internal/chaos"
)

type quietRedis struct{}

func (quietRedis) Printf(context.Context, string, ...any) {}

func main() {
	var c chaos.Config
	fs := flag.NewFlagSet("chaos", flag.ContinueOnError)
	c.Flags(fs)
	if err := fs.Parse(os.Args[1:]); err != nil {
		os.Exit(2)
	}
	if err := c.Finish(); err != nil {
		fmt.Fprintln(os.Stderr, "chaos:", err)
		os.Exit(2)
	}
	fmt.Fprintf(os.Stderr, "seed=%d (replay: CHAOS_SEED=%d make chaos)\n", c.Seed, c.Seed)
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	log := slog.New(slog.NewTextHandler(os.Stderr, nil))
	// The harness's own Redis client sees the scheduled Redis restart;
	// the outage is reported as redis_outage_ms, not as dial errors.
	redis.SetLogger(quietRedis{})
	f, err := chaos.Run(ctx, c, log)
	switch {
	case err == nil, errors.Is(err, chaos.ErrInvariant):
		if werr := f.Write(os.Stdout); werr != nil {
			fmt.Fprintln(os.Stderr, "chaos:", werr)
		}
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			stop()
			os.Exit(1)
		}
	default:
		// The run did not reach its check: no figure would mean anything
		// but the seed.
		fmt.Printf("seed=%d seed\n", c.Seed)
		fmt.Fprintln(os.Stderr, "chaos:", err)
		stop()
		os.Exit(2)
	}
}
