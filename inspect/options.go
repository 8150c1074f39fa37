package inspect

import (
	"io"
	"log/slog"

	"github.com/leasehold/leasehold/compensation"
	"github.com/leasehold/leasehold/idempotency"
	"github.com/leasehold/leasehold/tracing"
)

// Opt configures an [Inspector].
type Opt interface{ apply(*cfg) }

type optFunc func(*cfg)

func (f optFunc) apply(c *cfg) { f(c) }

type cfg struct {
	prefix    string
	storeOpts []idempotency.Opt
	logger    *slog.Logger
	tracer    *tracing.Tracer
	reg       *compensation.Registry
	dlq       DeadLetterSource
}

// WithPrefix sets the Redis key prefix the workers use. Default: "lh:".
func WithPrefix(p string) Opt { return optFunc(func(c *cfg) { c.prefix = p }) }

// WithStoreOptions adds the idempotency store options the workers use
// (layout, retention, maximum key length, bounds), so that keys are named
// and read as they write them. Default: none (the store's defaults).
func WithStoreOptions(opts ...idempotency.Opt) Opt {
	return optFunc(func(c *cfg) { c.storeOpts = append(c.storeOpts, opts...) })
}

// WithLogger sets the logger that every action (expire, reset, retry) is
// logged to, at warn level. Default: discard.
func WithLogger(l *slog.Logger) Opt { return optFunc(func(c *cfg) { c.logger = l }) }

// WithTracer traces every action as an operator span carrying the key
// attribute in the tracer's form. Default: none.
func WithTracer(t *tracing.Tracer) Opt { return optFunc(func(c *cfg) { c.tracer = t }) }

// WithCompensations gives the compensation handlers that
// [Inspector.RetryCompensation] runs. Default: none (retry refused with
// [ErrNoHandlers]; listing works without them).
func WithCompensations(r *compensation.Registry) Opt { return optFunc(func(c *cfg) { c.reg = r }) }

func newCfg(opts []Opt) cfg {
	c := cfg{prefix: "lh:", logger: slog.New(slog.NewTextHandler(io.Discard, nil))}
	for _, o := range opts {
		o.apply(&c)
	}
	if c.logger == nil {
		c.logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	return c
}
