package jobtrace

import (
	"context"

	"go.opentelemetry.io/otel/metric"
)

// ObserveLimitHeld registers f, called at every metrics collection, to
// report how many records the worker holds for their limit group
// (leasehold.limit.held). Unregister the returned registration when the
// worker stops. A nil *Metrics registers nothing.
func (m *Metrics) ObserveLimitHeld(f func() int64) (metric.Registration, error) {
	if m == nil {
		return nil, nil
	}
	return m.meter.RegisterCallback(func(_ context.Context, o metric.Observer) error {
		o.ObserveInt64(m.limitHeld, f())
		return nil
	}, m.limitHeld)
}
