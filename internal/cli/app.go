package cli

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"time"

	"github.com/leasehold/leasehold"
	"github.com/leasehold/leasehold/compensation"
)

// App is a program built on the worker command line: this package's
// commands (run, the operator commands, ...) plus what the program adds:
// its job types, compensation handlers, flags and commands. Package
// workercmd is its public face; cmd/worker is one such program.
type App struct {
	name     string
	register []func(context.Context, *leasehold.Worker, *Setup) error
	compens  []func(context.Context, *compensation.Registry, *Setup) error
	flags    []func(*FlagSet)
	commands map[string]command
	own      map[string]bool // commands the program added
	dev      DevParts        // cmd/worker's development parts (see DemoOptions)
}

// Option configures an [App]. Each option's doc comment states its default.
type Option interface{ apply(*App) }

type optFunc func(*App)

func (f optFunc) apply(a *App) { f(a) }

// newApp returns the app of opts over this package's commands.
func newApp(opts ...Option) *App {
	a := &App{name: "worker", commands: maps.Clone(commands), own: map[string]bool{}}
	for _, o := range opts {
		o.apply(a)
	}
	return a
}

func (a *App) names() []string { return slices.Sorted(maps.Keys(a.commands)) }

// WithName sets the program's name in usage texts and error messages.
// Default: "worker" (workercmd.Main: the name the program was started as).
func WithName(name string) Option {
	return optFunc(func(a *App) {
		if name != "" {
			a.name = name
		}
	})
}

// Register adds fn to what `run` calls after it has created the worker and
// before it starts it: fn registers the program's job types on w. Default:
// no job types (a worker without any runs nothing: every record is
// dead-lettered as of an unknown type).
func Register(fn func(ctx context.Context, w *leasehold.Worker, s *Setup) error) Option {
	return optFunc(func(a *App) { a.register = append(a.register, fn) })
}

// RegisterCompensations adds fn to what registers the program's
// compensation handlers: `run` calls it before the worker starts (its
// recovery sweep needs them), `compensations retry` before it retries.
// Default: none.
func RegisterCompensations(fn func(ctx context.Context, reg *compensation.Registry, s *Setup) error) Option {
	return optFunc(func(a *App) { a.compens = append(a.compens, fn) })
}

// WithFlags adds the program's own flags to `run` and `compensations`,
// the commands that run its code: define adds them to f, keeping the
// returned pointers for the functions of [Register] and
// [RegisterCompensations] to read. Default: none.
func WithFlags(define func(f *FlagSet)) Option {
	return optFunc(func(a *App) { a.flags = append(a.flags, define) })
}

// WithCommand adds a command (or replaces one of the same name). run gets
// the arguments after the command's name; it reports bad usage with an error
// that [UsageError] made (exit code 2). Default: this package's commands only.
func WithCommand(name, summary string, run func(ctx context.Context, e *Env, args []string) error) Option {
	return optFunc(func(a *App) { a.commands[name], a.own[name] = command{summary, run}, true })
}

// UsageError returns an error for bad flags or arguments: the command
// line exits with code 2 and prints its message.
func UsageError(format string, args ...any) error { return usagef(format, args...) }

// Setup is what the functions of [Register] and [RegisterCompensations] get
// besides the worker or the registry.
type Setup struct {
	// Log is the command's logger (run: --log-level and --log-format).
	Log *slog.Logger
	// Command is the command that runs: "run" or "compensations" (or
	// "ui").
	Command string

	closers []func()
}

// OnClose adds fn to what runs when the command ends, after the worker has
// shut down: close the pools and clients the job types opened. The last
// added runs first.
func (s *Setup) OnClose(fn func()) { s.closers = append(s.closers, fn) }

func (s *Setup) close() {
	for _, fn := range slices.Backward(s.closers) {
		fn()
	}
	s.closers = nil
}

// defineFlags adds the app's own flags to f (run, compensations).
func (a *App) defineFlags(f *flags) {
	f.own = true
	for _, define := range a.flags {
		define(&FlagSet{f: f})
	}
	f.own = false
}

// registerCompensations calls the functions of [RegisterCompensations].
func (a *App) registerCompensations(ctx context.Context, reg *compensation.Registry, s *Setup) error {
	for _, fn := range a.compens {
		if err := fn(ctx, reg, s); err != nil {
			return fmt.Errorf("register compensations: %w", err)
		}
	}
	return nil
}

// registerJobs calls the functions of [Register].
func (a *App) registerJobs(ctx context.Context, w *leasehold.Worker, s *Setup) error {
	for _, fn := range a.register {
		if err := fn(ctx, w, s); err != nil {
			var u *usageError
			if errors.As(err, &u) {
				return err
			}
			return fmt.Errorf("register job types: %w", err)
		}
	}
	return nil
}

// FlagSet defines a program's own flags (see [WithFlags]). Each flag may
// name an environment variable that sets its default; `-h` shows it as
// "(env NAME)" and docs/flags.md lists it. A bad environment value is a
// usage error.
type FlagSet struct{ f *flags }

// String defines a string flag; env ("" for none) sets its default.
func (s *FlagSet) String(name, env, def, usage string) *string {
	return s.f.str(name, env, def, usage)
}

// Int defines an integer flag; env ("" for none) sets its default.
func (s *FlagSet) Int(name, env string, def int, usage string) *int {
	p := new(int)
	s.f.intVar(p, name, env, def, usage)
	return p
}

// Bool defines a boolean flag; env ("" for none) sets its default.
func (s *FlagSet) Bool(name, env string, def bool, usage string) *bool {
	p := new(bool)
	s.f.boolVar(p, name, env, def, usage)
	return p
}

// Duration defines a duration flag; env ("" for none) sets its default.
func (s *FlagSet) Duration(name, env string, def time.Duration, usage string) *time.Duration {
	p := new(time.Duration)
	s.f.durationVar(p, name, env, def, usage)
	return p
}
