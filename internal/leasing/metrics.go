package leasing

import (
	"context"
	"errors"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
)

const instrumentation = "github.com/leasehold/leasehold/lease"

// metrics are the Manager's OpenTelemetry instruments.
type metrics struct {
	held    metric.Int64UpDownCounter
	renew   metric.Float64Histogram
	lost    metric.Int64Counter
	acquire metric.Int64Counter
}

//nolint:contextcheck // the zero series are set once at construction, under no caller's request
func newMetrics(mp metric.MeterProvider) (*metrics, error) {
	m := mp.Meter(instrumentation)
	var out metrics
	var err, e error
	out.held, e = m.Int64UpDownCounter("leasehold.lease.held",
		metric.WithDescription("Leases held by this process."), metric.WithUnit("{lease}"))
	err = errors.Join(err, e)
	out.renew, e = m.Float64Histogram("leasehold.lease.renew.duration",
		metric.WithDescription("Duration of one renew batch (one pipeline) round trip."), metric.WithUnit("s"),
		metric.WithExplicitBucketBoundaries(0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5))
	err = errors.Join(err, e)
	out.lost, e = m.Int64Counter("leasehold.lease.lost",
		metric.WithDescription("Leases lost, by cause (stolen, expired, renew_deadline, fenced)."), metric.WithUnit("{lease}"))
	err = errors.Join(err, e)
	out.acquire, e = m.Int64Counter("leasehold.lease.acquire",
		metric.WithDescription("Acquire attempts, by outcome (acquired, held, error)."), metric.WithUnit("{attempt}"))
	err = errors.Join(err, e)
	if err != nil {
		return nil, err
	}
	// Every cause and outcome at 0 from the start, so that a scrape right
	// after start shows the series and rate() sees the first increment.
	ctx := context.Background()
	for _, c := range []string{"stolen", "expired", "renew_deadline", "fenced", "other"} {
		out.lost.Add(ctx, 0, metric.WithAttributes(attribute.String("cause", c)))
	}
	for _, o := range []string{"acquired", "held", "error"} {
		out.acquire.Add(ctx, 0, metric.WithAttributes(attribute.String("outcome", o)))
	}
	return &out, nil
}

// causeName is the value of the cause attribute of leasehold.lease.lost.
func causeName(err error) string {
	switch {
	case errors.Is(err, ErrStolen):
		return "stolen"
	case errors.Is(err, ErrExpired):
		return "expired"
	case errors.Is(err, ErrRenewDeadline):
		return "renew_deadline"
	case errors.Is(err, errFencedLost):
		return "fenced"
	default:
		return "other"
	}
}

func (m *metrics) lostOne(err error) {
	m.lost.Add(context.Background(), 1, metric.WithAttributes(attribute.String("cause", causeName(err))))
}
