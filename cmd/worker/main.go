// Command worker runs leasehold workers and the tools around them: run,
// enqueue, inspect, leases, expire, dev-broker, payment-stub and demo.
// `worker help` lists the commands; `worker <command> -h` their flags.
package main

import (
	"context"
	"os"
	"os/signal"
	"syscall"

	"github.com/redis/go-redis/v9"

	"github.com/leasehold/leasehold/internal/cli"
)

// quiet drops go-redis's internal log lines (dial retries and the like):
// failures reach the user once, as the command's one-line error.
type quiet struct{}

func (quiet) Printf(context.Context, string, ...any) {}

func main() {
	redis.SetLogger(quiet{})
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := cli.Main(ctx, os.Args[1:], &cli.Env{Stdout: os.Stdout, Stderr: os.Stderr})
	stop()
	os.Exit(code)
}
