// Command worker runs leasehold workers and the tools around them: run,
// enqueue, inspect, leases, expire, dev-broker, payment-stub and demo.
// `worker help` lists the commands; `worker <command> -h` their flags.
//
// The first SIGINT or SIGTERM shuts a command down gracefully (`worker run`
// lets running jobs finish within --shutdown-timeout); a second one forces
// the exit (running jobs are cancelled and their leases released); a third
// one ends the process at once.
package main

import (
	"context"
	"os"
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
	ctx, force, stop := cli.NotifySignals(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := cli.Main(ctx, os.Args[1:], &cli.Env{Stdout: os.Stdout, Stderr: os.Stderr, Force: force})
	stop()
	os.Exit(code)
}
