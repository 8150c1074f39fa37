package lease

import (
	"log/slog"
	"time"

	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/trace"

	"github.com/leasehold/leasehold/internal/leasing"
)

// Opt configures a [Manager].
type Opt = leasing.Opt

// WithTTL sets the lease TTL: how long a lease lives in Redis without a
// renewal. Default 15s.
func WithTTL(d time.Duration) Opt { return leasing.WithTTL(d) }

// WithRenewInterval sets how often the renewer renews every held lease.
// Default TTL/3. It must be shorter than TTL minus the drift.
func WithRenewInterval(d time.Duration) Opt { return leasing.WithRenewInterval(d) }

// WithDrift sets the margin taken off a lease's local deadline (last
// successful renewal send time + TTL - drift) for clock rate differences and
// scheduling delays. Default TTL/100 + 2ms (the Redlock drift factor).
func WithDrift(d time.Duration) Opt { return leasing.WithDrift(d) }

// WithPrefix sets the key prefix of the Redis backend made by [NewManager]
// ([NewManagerWithBackend] ignores it: the backend owns its keys).
// Default "lh:".
func WithPrefix(p string) Opt { return leasing.WithPrefix(p) }

// WithLogger sets the logger. Default slog.Default().
func WithLogger(l *slog.Logger) Opt { return leasing.WithLogger(l) }

// WithClock sets the clock that local deadlines, renew timers and send times
// use. Default the system clock (monotonic readings).
func WithClock(cl Clock) Opt { return leasing.WithClock(cl) }

// WithTracerProvider sets the OpenTelemetry tracer provider for the acquire,
// release, fenced and renew spans. Default: otel.GetTracerProvider(), the
// OpenTelemetry global, as in every leasehold layer.
func WithTracerProvider(tp trace.TracerProvider) Opt { return leasing.WithTracerProvider(tp) }

// WithMeterProvider sets the OpenTelemetry meter provider for the lease
// metrics (leasehold.lease.held, leasehold.lease.renew.duration,
// leasehold.lease.lost, leasehold.lease.acquire). Default:
// otel.GetMeterProvider(), the OpenTelemetry global, as in every leasehold
// layer.
func WithMeterProvider(mp metric.MeterProvider) Opt { return leasing.WithMeterProvider(mp) }

// WithLeaveOnShutdown makes Shutdown leave held leases in Redis to expire
// instead of releasing them. Default false (Shutdown releases them).
func WithLeaveOnShutdown(leave bool) Opt { return leasing.WithLeaveOnShutdown(leave) }

// WithRenewBatch sets how many renewals go to the backend in one batch (one
// pipeline for the Redis backend). Default 1000.
func WithRenewBatch(n int) Opt { return leasing.WithRenewBatch(n) }

// WithRenewParallelism sets how many renew batches are in flight at once.
// Default 4.
func WithRenewParallelism(n int) Opt { return leasing.WithRenewParallelism(n) }
