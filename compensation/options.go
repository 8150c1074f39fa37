package compensation

import (
	"context"
	"log/slog"
	"time"
)

// Opt configures a [Runner].
type Opt interface{ apply(*cfg) }

type optFunc func(*cfg)

func (f optFunc) apply(c *cfg) { f(c) }

// setting is an option that names the one setting it makes and its value
// (Setting), so that a program that builds this layer with options of its
// own (the leasehold Worker) can refuse two different values for one
// setting instead of letting the later silently win.
type setting struct {
	name  string
	value any
	fn    func(*cfg)
}

func (s setting) apply(c *cfg) { s.fn(c) }

// Setting names the setting the option makes and its value.
func (s setting) Setting() (name string, value any) { return s.name, s.value }

type cfg struct {
	prefix          string
	attempts        int
	backoffBase     time.Duration
	backoffMax      time.Duration
	stepTimeout     time.Duration
	journalTimeout  time.Duration
	openRetention   time.Duration
	closedRetention time.Duration
	maxSteps        int
	maxArgs         int
	sweepInterval   time.Duration
	sweepBatch      int
	poll            time.Duration
	logger          *slog.Logger
	observer        Observer
	committed       func(ctx context.Context, ref Ref) (bool, error)
}

// WithPrefix sets the prefix of every Redis key the Runner writes. Default "lh:".
func WithPrefix(p string) Opt { return setting{"prefix", p, func(c *cfg) { c.prefix = p }} }

// WithAttempts sets how many times a step's compensation is tried before it
// is dead-lettered. Default 5.
func WithAttempts(n int) Opt { return optFunc(func(c *cfg) { c.attempts = n }) }

// WithBackoff sets the step of the delay after the first failed attempt
// (doubling after each further failure) and its ceiling; each delay is drawn
// between half the step and the whole step. Default 200ms, 30s.
func WithBackoff(base, ceiling time.Duration) Opt {
	return optFunc(func(c *cfg) { c.backoffBase, c.backoffMax = base, ceiling })
}

// WithStepTimeout bounds one attempt of one compensation handler. Default 30s.
func WithStepTimeout(d time.Duration) Opt { return optFunc(func(c *cfg) { c.stepTimeout = d }) }

// WithJournalTimeout bounds one call compensating a journal, waits for another
// holder and backoffs included. Default 15m.
func WithJournalTimeout(d time.Duration) Opt { return optFunc(func(c *cfg) { c.journalTimeout = d }) }

// WithRetention sets how long an unfinished journal is kept after its last
// write (it must outlast the longest job) and how long a committed or
// compensated one is kept for inspection. Dead-lettered journals never
// expire. Default 7 days and 24 hours.
func WithRetention(open, closed time.Duration) Opt {
	return optFunc(func(c *cfg) { c.openRetention, c.closedRetention = open, closed })
}

// WithMaxSteps bounds the steps of one journal. Default 1000.
func WithMaxSteps(n int) Opt { return optFunc(func(c *cfg) { c.maxSteps = n }) }

// WithMaxArgsBytes bounds the encoded arguments of one step. Default 64 KiB.
func WithMaxArgsBytes(n int) Opt { return optFunc(func(c *cfg) { c.maxArgs = n }) }

// WithSweepInterval sets how often [Runner.Start]'s recovery sweep runs.
// Default 30s.
func WithSweepInterval(d time.Duration) Opt { return optFunc(func(c *cfg) { c.sweepInterval = d }) }

// WithSweepBatch sets how many journal index entries the sweep examines per
// pipelined round trip; a pass pages through the whole index. Default 1000.
func WithSweepBatch(n int) Opt { return optFunc(func(c *cfg) { c.sweepBatch = n }) }

// WithPollInterval sets how often a caller that must wait for another
// process's compensation of the same journal checks again. Default 250ms.
func WithPollInterval(d time.Duration) Opt { return optFunc(func(c *cfg) { c.poll = d }) }

// WithLogger sets the logger. Default: discard.
func WithLogger(l *slog.Logger) Opt { return optFunc(func(c *cfg) { c.logger = l }) }

// WithObserver sets the hooks called around every compensation attempt
// (tracing spans, metrics). Default: none.
func WithObserver(o Observer) Opt { return optFunc(func(c *cfg) { c.observer = o }) }

// WithCommitted lets the recovery sweep settle sealed journals whose owner
// died between sealing and closing: f reports whether the job's commit for
// ref landed (the idempotency record is completed with ref.Fence). Committed
// journals are closed, others compensated. An error leaves the journal sealed
// for the next sweep; [ErrCommitUnknown] leaves it sealed without counting a
// failure. Default: none, and the sweep leaves sealed journals to the next
// takeover of the key.
func WithCommitted(f func(ctx context.Context, ref Ref) (bool, error)) Opt {
	return optFunc(func(c *cfg) { c.committed = f })
}
