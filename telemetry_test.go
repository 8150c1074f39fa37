package leasehold

import (
	"context"
	"testing"

	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	tracenoop "go.opentelemetry.io/otel/trace/noop"

	"github.com/leasehold/leasehold/tracing"
)

// TestDeadLetteredZeroAtStart: a started worker's leasehold.dead_lettered
// has a series at 0 for every reason it dead-letters for, before any record
// came, so that a scrape right after start shows them.
func TestDeadLetteredZeroAtStart(t *testing.T) {
	h := setup(t, 1)
	reader := sdkmetric.NewManualReader()
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
	t.Cleanup(func() { _ = mp.Shutdown(context.Background()) })
	tr, err := tracing.New(tracing.WithTracerProvider(tracenoop.NewTracerProvider()), tracing.WithMeterProvider(mp))
	if err != nil {
		t.Fatal(err)
	}
	h.start(t, h.rdb, func(w *Worker) {
		must(t, w.Register("test.op", func(context.Context, *Job) ([]byte, error) { return nil, nil }))
	}, WithTracing(tr))

	var rm metricdata.ResourceMetrics
	if err := reader.Collect(context.Background(), &rm); err != nil {
		t.Fatal(err)
	}
	got := map[string]int64{}
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			if m.Name != tracing.MetricDeadLettered {
				continue
			}
			for _, p := range m.Data.(metricdata.Sum[int64]).DataPoints {
				r, _ := p.Attributes.Value(tracing.LabelReason)
				got[r.AsString()] = p.Value
			}
		}
	}
	for _, r := range deadLetterReasons {
		if v, ok := got[r]; !ok || v != 0 {
			t.Errorf("leasehold.dead_lettered{reason=%q} = %d (present %v), want 0 at start", r, v, ok)
		}
	}
	if len(deadLetterReasons) < 11 {
		t.Errorf("deadLetterReasons lists %d reasons, want the 11 Reason* constants", len(deadLetterReasons))
	}
}
