package cli

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strconv"
	"strings"
	"time"
)

// Env is what a subcommand may touch: its output streams and the process
// environment. Tests give their own.
type Env struct {
	Stdout io.Writer
	Stderr io.Writer
	Getenv func(string) string
	// Force, when closed, cuts a graceful shutdown short: `worker run`
	// stops waiting for running jobs, cancels them and releases their
	// leases (closed at a second SIGINT or SIGTERM, see [NotifySignals]).
	// Nil: never.
	Force <-chan struct{}

	app      *App         // set by Run
	describe func(*flags) // set by describeCommands: -h hands over the flags instead of printing them
}

// application returns the app Run set, or this package's commands alone.
func (e *Env) application() *App {
	if e.app == nil {
		e.app = newApp()
	}
	return e.app
}

type command struct {
	summary string
	run     func(ctx context.Context, e *Env, args []string) error
}

var commands map[string]command

func init() {
	commands = map[string]command{
		"run":           {"consume jobs: Kafka consumer group + Redis leases (--brokers, or --embedded-kafka for development)", cmdRun},
		"enqueue":       {"produce test jobs (demo.sleep, or --type T with payloads {\"n\": N}), with a duplicate fraction and a rate, showing progress", cmdEnqueue},
		"inspect":       {"show one idempotency key: cluster tag, lease (owner digest, fence, TTL), record state, last heartbeat details", cmdInspect},
		"history":       {"show every attempt of a key its history keeps: fence, owner, worker, start, end, how it ended, compensations, trace ID (--json)", cmdHistory},
		"leases":        {"list the leases held now: key, owner digest, fence, remaining TTL, record state, attempt, details", cmdLeases},
		"cancel":        {"cancel the running job of a key (--reason R): its worker stops it at its next lease renewal, compensates its saga steps and records it as cancelled until 'reset'", cmdCancel},
		"expire":        {"force the lease of a key to expire now (logged); its holder loses it", cmdExpire},
		"capacity":      {"measure bytes per record on the live Redis (it writes 20000 sample records there, then deletes them) and estimate memory for a rate and retention", cmdCapacity},
		"compensations": {"list dead-lettered and pending compensations; 'compensations retry KEY' runs the dead-lettered again", cmdCompensations},
		"dlq":           {"'dlq list' shows dead-lettered records (filter by reason, type, key); 'dlq replay' produces them back to their topic, each at most once", cmdDLQ},
		"topics":        {"'topics create' makes the job and dead-letter topics with the replication and configs the worker relies on; 'topics describe' shows them; 'topics check' says what worker run would refuse", cmdTopics},
		"limits":        {"list the fleet-wide limit groups: running/limit, rate, Retry-After hold (--json); --hold D or --release on one GROUP", cmdLimits},
		"pause":         {"pause a job type across the fleet: workers hold its new records (not run, offsets not committed) until 'resume'; running jobs finish; without TYPE, list the paused types", cmdPause},
		"resume":        {"lift the pause of a job type: the workers run the records they held", cmdResume},
		"reset":         {"forget the record of a key so that its next delivery runs again (refused while its lease is live unless --force; logged, traced)", cmdReset},
		"audit":         {"account for every record of a range of the jobs topic (offsets or --since/--until): completed with its fence, duplicate, dead-lettered, failed, cancelled, running, or unaccounted (exit 1)", cmdAudit},
		"fleet":         {"list the live workers (host, pid, version, group, topics, concurrency, running jobs, counters) and the fleet's rates", cmdFleet},
		"version":       {"print the module version, the VCS revision and time it was built from, and the Go version", cmdVersion},
		"ui":            {"serve the web console: overview, running jobs, keys, compensations, dead letters (read-only unless --actions)", cmdUI},
	}
}

// Run runs the command line of the application opts make and returns the
// process exit code: 0 on success, 1 when the command failed, 2 for usage
// errors. Errors are printed on one line to e.Stderr.
func Run(ctx context.Context, args []string, e *Env, opts ...Option) int {
	app := newApp(opts...)
	e.app = app
	if e.Getenv == nil {
		e.Getenv = os.Getenv
	}
	if len(args) == 0 {
		_, _ = fmt.Fprintf(e.Stderr, "%s: missing command (run '%[1]s help' for the usage)\n", app.name)
		return 2
	}
	name := args[0]
	switch name {
	case "-h", "-help", "--help", "help":
		app.usage(e.Stdout)
		return 0
	case "-version", "--version":
		name = "version"
	}
	cmd, ok := app.commands[name]
	if !ok {
		_, _ = fmt.Fprintf(e.Stderr, "%s: unknown command %q (run '%[1]s help')\n", app.name, name)
		return 2
	}
	err := cmd.run(ctx, e, args[1:])
	switch {
	case err == nil, errors.Is(err, flag.ErrHelp):
		return 0
	case errors.As(err, new(*usageError)):
		_, _ = fmt.Fprintf(e.Stderr, "%s %s: %s\n", app.name, name, userMessage(ctx, err))
		return 2
	default:
		_, _ = fmt.Fprintf(e.Stderr, "%s %s: %s\n", app.name, name, userMessage(ctx, err))
		return 1
	}
}

func (a *App) usage(w io.Writer) {
	_, _ = fmt.Fprintf(w, "usage: %s <command> [flags]   (%[1]s <command> -h for its flags)\n", a.name)
	_, _ = fmt.Fprintln(w)
	for _, n := range a.names() {
		_, _ = fmt.Fprintf(w, "  %-14s %s\n", n, a.commands[n].summary)
	}
}

// usageError is a bad flag, argument or value: exit code 2.
type usageError struct{ err error }

func (u *usageError) Error() string { return u.err.Error() }
func (u *usageError) Unwrap() error { return u.err }

func usagef(format string, args ...any) error { return &usageError{fmt.Errorf(format, args...)} }

// oneLine flattens an error message to one line.
func oneLine(err error) string {
	s := strings.Join(strings.Fields(err.Error()), " ")
	if len(s) > 400 {
		s = s[:400] + "..."
	}
	return s
}

// flags wraps a FlagSet whose defaults may come from environment variables.
// Define flags with stringVar, intVar, durationVar and boolVar
// (flagspec.go), which name the environment variable once.
type flags struct {
	*flag.FlagSet
	e          *Env
	name, args string
	bad        error           // a bad environment value
	specs      map[string]spec // flagspec.go
	own        bool            // the program's own flags are being defined (App.defineFlags)
}

func newFlags(e *Env, name, args string) *flags {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	fs.Usage = func() {} // errors are reported once, as one line, by Main
	return &flags{FlagSet: fs, e: e, name: name, args: args}
}

// usage prints the command's flags on stdout (for -h).
func (f *flags) usage() {
	_, _ = fmt.Fprintf(f.e.Stdout, "usage: %s %s [flags] %s\n", f.e.application().name, f.name, f.args)
	f.SetOutput(f.e.Stdout)
	f.PrintDefaults()
	f.SetOutput(io.Discard)
}

// parse parses args; a parse failure is a usage error.
func (f *flags) parse(args []string) error {
	if f.bad != nil {
		return f.bad
	}
	if err := f.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			if f.e.describe != nil {
				f.e.describe(f)
			} else {
				f.usage()
			}
			return err
		}
		return &usageError{err}
	}
	return nil
}

func (f *flags) env(name, def string) string {
	if v := f.e.Getenv(name); v != "" {
		return v
	}
	return def
}

// envInt reads an integer default from env var name; a bad value is
// reported by parse.
func (f *flags) envInt(name string, def int) int {
	v := f.e.Getenv(name)
	if v == "" {
		return def
	}
	n, err := strconv.Atoi(v)
	if err != nil {
		f.bad = usagef("%s=%q: not an integer", name, v)
		return def
	}
	return n
}

// envDur reads a duration default from env var name; a bad value is
// reported by parse.
func (f *flags) envDur(name string, def time.Duration) time.Duration {
	v := f.e.Getenv(name)
	if v == "" {
		return def
	}
	d, err := time.ParseDuration(v)
	if err != nil {
		f.bad = usagef("%s=%q: not a duration", name, v)
		return def
	}
	return d
}

// envBool reads a boolean default from env var name (1, t, true, 0, f,
// false, ...); a bad value is reported by parse.
func (f *flags) envBool(name string, def bool) bool {
	v := f.e.Getenv(name)
	if v == "" {
		return def
	}
	b, err := strconv.ParseBool(v)
	if err != nil {
		f.bad = usagef("%s=%q: want true or false", name, v)
		return def
	}
	return b
}

// isSet reports whether the flag name was given on the command line.
func (f *flags) isSet(name string) bool {
	set := false
	f.Visit(func(fl *flag.Flag) { set = set || fl.Name == name })
	return set
}

// noArgs refuses positional arguments.
func (f *flags) noArgs() error {
	if f.NArg() > 0 {
		return usagef("unexpected argument %q", f.Arg(0))
	}
	return nil
}

func splitList(s string) []string {
	var out []string
	for _, p := range strings.Split(s, ",") {
		if p = strings.TrimSpace(p); p != "" {
			out = append(out, p)
		}
	}
	return out
}

func newLogger(w io.Writer, level, format string) (*slog.Logger, error) {
	lv, err := parseLevel(level)
	if err != nil {
		return nil, err
	}
	opts := &slog.HandlerOptions{Level: lv}
	switch format {
	case "text", "":
		return slog.New(slog.NewTextHandler(w, opts)), nil
	case "json":
		return slog.New(slog.NewJSONHandler(w, opts)), nil
	}
	return nil, usagef("log format %q: want text or json", format)
}

// parseLevel reads a log level flag: debug, info, warn or error.
func parseLevel(level string) (slog.Level, error) {
	var lv slog.Level
	if err := lv.UnmarshalText([]byte(level)); err != nil {
		return lv, usagef("log level %q: want debug, info, warn or error", level)
	}
	return lv, nil
}
