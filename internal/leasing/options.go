package leasing

import (
	"log/slog"
	"time"

	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/trace"
)

// Opt configures a [Manager].
type Opt interface{ apply(*cfg) }

type optFunc func(*cfg)

func (f optFunc) apply(c *cfg) { f(c) }

type cfg struct {
	ttl        time.Duration
	interval   time.Duration
	drift      time.Duration
	driftSet   bool
	prefix     string
	prefixSet  bool
	logger     *slog.Logger
	clock      Clock
	tracerProv trace.TracerProvider
	meterProv  metric.MeterProvider
	leave      bool
	batch      int
	parallel   int
}

// WithTTL sets the lease TTL: how long a lease lives in Redis without a
// renewal. Default 15s.
func WithTTL(d time.Duration) Opt { return optFunc(func(c *cfg) { c.ttl = d }) }

// WithRenewInterval sets how often the renewer renews every held lease.
// Default TTL/3. It must be shorter than TTL minus the drift.
func WithRenewInterval(d time.Duration) Opt { return optFunc(func(c *cfg) { c.interval = d }) }

// WithDrift sets the margin taken off a lease's local deadline (last
// successful renewal send time + TTL - drift) for clock rate differences and
// scheduling delays. Default TTL/100 + 2ms (the Redlock drift factor).
func WithDrift(d time.Duration) Opt {
	return optFunc(func(c *cfg) { c.drift, c.driftSet = d, true })
}

// WithPrefix sets the key prefix of the Redis backend made by [NewManager]
// ([NewManagerWithBackend] ignores it: the backend owns its keys).
// Default "lh:".
func WithPrefix(p string) Opt {
	return optFunc(func(c *cfg) { c.prefix, c.prefixSet = p, true })
}

// WithLogger sets the logger. Default slog.Default().
func WithLogger(l *slog.Logger) Opt { return optFunc(func(c *cfg) { c.logger = l }) }

// WithClock sets the clock that local deadlines, renew timers and send times
// use. Default the system clock (monotonic readings).
func WithClock(cl Clock) Opt { return optFunc(func(c *cfg) { c.clock = cl }) }

// WithTracerProvider sets the OpenTelemetry tracer provider for the acquire,
// release, fenced and renew spans. Default a no-op provider.
func WithTracerProvider(tp trace.TracerProvider) Opt {
	return optFunc(func(c *cfg) { c.tracerProv = tp })
}

// WithMeterProvider sets the OpenTelemetry meter provider for the lease
// metrics (leasehold.lease.held, leasehold.lease.renew.duration,
// leasehold.lease.lost, leasehold.lease.acquire). Default a no-op provider.
func WithMeterProvider(mp metric.MeterProvider) Opt {
	return optFunc(func(c *cfg) { c.meterProv = mp })
}

// WithLeaveOnShutdown makes Shutdown leave held leases in Redis to expire
// instead of releasing them. Default false (Shutdown releases them).
func WithLeaveOnShutdown(leave bool) Opt { return optFunc(func(c *cfg) { c.leave = leave }) }

// WithRenewBatch sets how many renewals go to the backend in one batch (one
// pipeline for the Redis backend). Default 1000.
func WithRenewBatch(n int) Opt { return optFunc(func(c *cfg) { c.batch = n }) }

// WithRenewParallelism sets how many renew batches are in flight at once.
// Default 4.
func WithRenewParallelism(n int) Opt { return optFunc(func(c *cfg) { c.parallel = n }) }
