package leasehold

import (
	"testing"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"

	"github.com/leasehold/leasehold/compensation"
	"github.com/leasehold/leasehold/idempotency"
	"github.com/leasehold/leasehold/internal/audit"
	"github.com/leasehold/leasehold/outcome"
	"github.com/leasehold/leasehold/tracing"
)

// TestOutcomeVocabularies: every outcome the worker's vocabularies can name
// (claims as Hooks and Stats see them, compensation steps, history ends, the
// audit) is in package outcome's set. The attempt ends are
// checked by TestAttemptOutcomeNames; the emitted span attributes and
// metric labels by checkOutcomes in the telemetry tests.
func TestOutcomeVocabularies(t *testing.T) {
	t.Parallel()
	var names []string
	for o := Outcome(0); o <= OutcomeUndecodable; o++ {
		names = append(names, o.String())
	}
	for _, o := range []compensation.Outcome{compensation.OutcomeCompensated, compensation.OutcomeRetry,
		compensation.OutcomeDeadLettered, compensation.OutcomeSuperseded} {
		names = append(names, string(o))
	}
	names = append(names, idempotency.EndCompleted, idempotency.EndFailed, idempotency.EndLeaseLost,
		idempotency.EndCommitRefused, idempotency.EndTakenOver, idempotency.EndCancelled, idempotency.EndDeadLettered,
		idempotency.EndUnrecorded)
	for _, o := range audit.Outcomes() {
		names = append(names, string(o))
	}
	for _, n := range names {
		if !outcome.Known(n) {
			t.Errorf("outcome %q is not in package outcome's set", n)
		}
	}
}

// checkOutcomes fails t for a leasehold.outcome span attribute (on a span
// or one of its events) or an outcome metric label outside package
// outcome's set.
func checkOutcomes(t *testing.T, spans []sdktrace.ReadOnlySpan, rm *metricdata.ResourceMetrics) {
	t.Helper()
	check := func(where string, kvs []attribute.KeyValue, key attribute.Key) {
		for _, kv := range kvs {
			if kv.Key == key && !outcome.Known(kv.Value.AsString()) {
				t.Errorf("%s has %s=%q, not in package outcome's set", where, key, kv.Value.AsString())
			}
		}
	}
	for _, s := range spans {
		check("span "+s.Name(), s.Attributes(), tracing.AttrOutcome)
		for _, e := range s.Events() {
			check("event "+e.Name+" of span "+s.Name(), e.Attributes, tracing.AttrOutcome)
		}
	}
	if rm == nil {
		return
	}
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			for _, set := range metricAttrSets(m.Data) {
				check("metric "+m.Name, set.ToSlice(), tracing.LabelOutcome)
			}
		}
	}
}

// metricAttrSets lists the attribute sets of a metric's data points.
func metricAttrSets(data metricdata.Aggregation) []attribute.Set {
	var out []attribute.Set
	switch d := data.(type) {
	case metricdata.Sum[int64]:
		for _, p := range d.DataPoints {
			out = append(out, p.Attributes)
		}
	case metricdata.Sum[float64]:
		for _, p := range d.DataPoints {
			out = append(out, p.Attributes)
		}
	case metricdata.Gauge[int64]:
		for _, p := range d.DataPoints {
			out = append(out, p.Attributes)
		}
	case metricdata.Histogram[float64]:
		for _, p := range d.DataPoints {
			out = append(out, p.Attributes)
		}
	}
	return out
}
