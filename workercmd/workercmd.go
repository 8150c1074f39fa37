// Package workercmd turns a program that registers its job types into a
// leasehold worker binary with the same command line as cmd/worker: `run`
// with every flag and environment variable of `worker run`, and the operator
// commands (inspect, leases, expire, reset, dlq, capacity, compensations,
// enqueue, ...). A team's main is a few lines:
//
//	func main() {
//		workercmd.Main(workercmd.Register(func(_ context.Context, w *leasehold.Worker, _ *workercmd.Setup) error {
//			return w.Register("report.build", leasehold.Typed(buildReport))
//		}))
//	}
//
// The program's own settings come in with [WithFlags]: flags that name an
// environment variable, shown by `run -h` like the worker's own, whose
// values the functions of [Register] and [RegisterCompensations] read.
// docs/flags.md lists the flags and environment variables of every command.
//
// The package is a thin layer over the worker's internal command line, so
// that cmd/worker, built with it, and a team's binary behave the same.
package workercmd

import (
	"context"
	"os"
	"path/filepath"
	"syscall"

	"github.com/redis/go-redis/v9"

	"github.com/leasehold/leasehold"
	"github.com/leasehold/leasehold/compensation"
	"github.com/leasehold/leasehold/internal/cli"
)

// Option configures the command line (see [Main] and [Run]). Each option's
// doc comment states its default.
type Option = cli.Option

// Env is what a command may touch: its output streams, the process
// environment (Getenv, default os.Getenv) and Force, closed when a second
// signal cuts a graceful shutdown short.
type Env = cli.Env

// Setup is what the functions of [Register] and [RegisterCompensations] get:
// the command's logger, the command's name, and OnClose for what they open.
type Setup = cli.Setup

// FlagSet defines the program's own flags (see [WithFlags]).
type FlagSet = cli.FlagSet

// Register adds fn to what `run` calls after it has created the worker and
// before it starts it: fn registers the program's job types on w, and may
// open what they need (close it with [Setup.OnClose]). Default: no job
// types.
func Register(fn func(ctx context.Context, w *leasehold.Worker, s *Setup) error) Option {
	return cli.Register(fn)
}

// RegisterCompensations adds fn to what registers the program's
// compensation handlers: `run` calls it before the worker starts (the
// recovery sweep needs them), `compensations retry` before it retries, so
// that any process can compensate. Default: none.
func RegisterCompensations(fn func(ctx context.Context, reg *compensation.Registry, s *Setup) error) Option {
	return cli.RegisterCompensations(fn)
}

// WithFlags adds the program's own flags to `run` and `compensations`:
// define adds them to f and keeps the returned pointers, which the functions
// of [Register] and [RegisterCompensations] read (flags are parsed before
// they are called). Default: none.
func WithFlags(define func(f *FlagSet)) Option { return cli.WithFlags(define) }

// WithCommand adds a command to the command line (or replaces one of the
// same name): run gets the arguments after the command's name, and returns
// an error made by [UsageError] for bad usage (exit code 2), any other error
// for a failure (exit code 1). Default: the worker's commands only.
func WithCommand(name, summary string, run func(ctx context.Context, e *Env, args []string) error) Option {
	return cli.WithCommand(name, summary, run)
}

// WithName sets the program's name in usage texts and error messages.
// Default: the base name of os.Args[0] with [Main], "worker" with [Run].
func WithName(name string) Option { return cli.WithName(name) }

// UsageError returns an error for bad flags or arguments (exit code 2).
func UsageError(format string, args ...any) error { return cli.UsageError(format, args...) }

// Main runs the command line that opts make with os.Args and exits with the
// command's code: 0 on success, 1 on failure, 2 for bad usage. The first
// SIGINT or SIGTERM shuts the command down gracefully (`run` lets running
// jobs finish within --shutdown-timeout); a second one forces the exit
// (running jobs are cancelled and their leases released); a third one ends
// the process at once. go-redis's own log lines are silenced: a failure
// reaches the user once, as the command's one-line error.
func Main(opts ...Option) {
	redis.SetLogger(quiet{})
	ctx, force, stop := NotifySignals(context.Background(), os.Interrupt, syscall.SIGTERM)
	opts = append([]Option{WithName(filepath.Base(os.Args[0]))}, opts...)
	code := Run(ctx, os.Args[1:], &Env{Stdout: os.Stdout, Stderr: os.Stderr, Force: force}, opts...)
	stop()
	os.Exit(code)
}

// Run runs the command line that opts make with args (the command and its
// flags, without the program name) and returns the exit code, as [Main]
// does, without touching the process: for tests, or a main of its own.
func Run(ctx context.Context, args []string, e *Env, opts ...Option) int {
	return cli.Run(ctx, args, e, opts...)
}

// NotifySignals returns a context cancelled at the first of sigs (a
// graceful shutdown) and a channel closed at the second (a forced exit),
// for [Env.Force]; after the second, the signals are no longer caught.
// Call stop when the command returns.
func NotifySignals(parent context.Context, sigs ...os.Signal) (ctx context.Context, force <-chan struct{}, stop func()) {
	return cli.NotifySignals(parent, sigs...)
}

// quiet drops go-redis's internal log lines (dial retries and the like).
type quiet struct{}

func (quiet) Printf(context.Context, string, ...any) {}
