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
func WithTTL(d time.Duration) Opt {
	return setting{"ttl", d, func(c *cfg) { c.ttl = d }}
}

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
	return setting{"prefix", p, func(c *cfg) { c.prefix, c.prefixSet = p, true }}
}

// WithLogger sets the logger. Default slog.Default().
func WithLogger(l *slog.Logger) Opt { return optFunc(func(c *cfg) { c.logger = l }) }

// WithClock sets the clock that local deadlines, renew timers and send times
// use. Default the system clock (monotonic readings).
func WithClock(cl Clock) Opt { return optFunc(func(c *cfg) { c.clock = cl }) }

// WithTracerProvider sets the OpenTelemetry tracer provider for the acquire,
// release, fenced and renew spans. Default: otel.GetTracerProvider(), the
// OpenTelemetry global, as in every leasehold layer.
func WithTracerProvider(tp trace.TracerProvider) Opt {
	return setting{"tracer provider", tp, func(c *cfg) { c.tracerProv = tp }}
}

// WithMeterProvider sets the OpenTelemetry meter provider for the lease
// metrics (leasehold.lease.held, leasehold.lease.renew.duration,
// leasehold.lease.lost, leasehold.lease.acquire). Default:
// otel.GetMeterProvider(), the OpenTelemetry global, as in every leasehold
// layer.
func WithMeterProvider(mp metric.MeterProvider) Opt {
	return setting{"meter provider", mp, func(c *cfg) { c.meterProv = mp }}
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
