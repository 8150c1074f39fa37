package leaseholdtest

import (
	"log/slog"

	"github.com/leasehold/leasehold/compensation"
)

// Opt configures an [Env]. Each option's doc states its default.
type Opt interface{ apply(*config) }

type optFunc func(*config)

func (f optFunc) apply(c *config) { f(c) }

type config struct {
	key      string
	typ      string
	payload  []byte
	headers  map[string]string
	attempt  int
	fence    uint64
	takeover bool
	last     []byte
	reg      *compensation.Registry
	log      *slog.Logger
	maxRes   int
}

// WithKey sets the job's idempotency key. Default: "test-key".
func WithKey(key string) Opt { return optFunc(func(c *config) { c.key = key }) }

// WithType sets the job type. Default: "test.job".
func WithType(typ string) Opt { return optFunc(func(c *config) { c.typ = typ }) }

// WithPayload sets the record value the handler reads (JSON for a handler
// built with leasehold.Typed). Default: empty.
func WithPayload(p []byte) Opt {
	return optFunc(func(c *config) { c.payload = append([]byte(nil), p...) })
}

// WithHeaders sets the job's user headers. Default: none.
func WithHeaders(h map[string]string) Opt { return optFunc(func(c *config) { c.headers = h }) }

// WithAttempt sets the first run's attempt number (the next runs count on
// from it). Default: 1.
func WithAttempt(n int) Opt { return optFunc(func(c *config) { c.attempt = n }) }

// WithFence sets the first run's fencing token (the next runs get higher
// ones). Default: 1.
func WithFence(f uint64) Opt { return optFunc(func(c *config) { c.fence = f }) }

// WithTakeover marks the first run as a takeover of a key whose previous
// owner's lease expired. Default: false.
func WithTakeover(b bool) Opt { return optFunc(func(c *config) { c.takeover = b }) }

// WithLastHeartbeat sets the heartbeat details a previous attempt left, what
// the first run reads with Job.LastHeartbeat. Default: none (a first
// attempt).
func WithLastHeartbeat(details []byte) Opt {
	return optFunc(func(c *config) { c.last = append([]byte(nil), details...) })
}

// WithCompensation gives the registry of compensation handlers that saga
// steps may name, as leasehold.WithCompensation does for a worker. Default:
// none; steps fail with leasehold.ErrNoCompensation.
func WithCompensation(reg *compensation.Registry) Opt {
	return optFunc(func(c *config) { c.reg = reg })
}

// WithMaxResult sets the bound on a result in bytes, what the worker's
// idempotency store allows (idempotency.WithMaxResult given to
// leasehold.WithIdempotencyOptions): a larger result fails the attempt with
// an error matching leasehold.ErrResultTooLarge, as the worker's commit
// does. Default: 64 KiB, the store's default.
func WithMaxResult(n int) Opt { return optFunc(func(c *config) { c.maxRes = n }) }

// WithLogger sets the logger behind Job.Logger (the job's type, key, fence
// and attempt are added to its lines). Default: a logger that discards.
func WithLogger(l *slog.Logger) Opt { return optFunc(func(c *config) { c.log = l }) }

// defaultMaxResult is the idempotency store's default bound on a result.
const defaultMaxResult = 64 << 10
