package leasehold

import (
	"context"
	"errors"
	"sort"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/twmb/franz-go/pkg/kgo"
	"go.opentelemetry.io/otel/propagation"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/leasehold/leasehold/internal/testkit"
	"github.com/leasehold/leasehold/tracing"
)

// TestTracingSpans runs a heartbeating job, a duplicate of it and a poison
// job through a traced worker and checks the spans: `process <topic>` per attempt
// with claim, handler and commit children, the producer's trace carried
// through Kafka, and the heartbeat, replay and dead-letter events.
func TestTracingSpans(t *testing.T) {
	h := setup(t, 1)
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	t.Cleanup(func() { _ = tp.Shutdown(context.Background()) })
	reader := sdkmetric.NewManualReader()
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
	t.Cleanup(func() { _ = mp.Shutdown(context.Background()) })
	tr, err := tracing.New(tracing.WithTracerProvider(tp), tracing.WithMeterProvider(mp), tracing.WithConsumerGroup(h.group),
		tracing.WithPropagator(propagation.TraceContext{}))
	if err != nil {
		t.Fatal(err)
	}
	handler := func(ctx context.Context, j *Job) ([]byte, error) {
		if string(j.Payload) == "poison" {
			return nil, Permanent(errors.New("bad"))
		}
		if err := j.Heartbeat(ctx, []byte("1")); err != nil {
			return nil, err
		}
		return []byte("ok"), nil
	}
	w := h.start(t, h.rdb, func(w *Worker) { must(t, w.Register("test.op", handler)) }, WithTracing(tr))

	// Produce with a traced client under an enqueue span.
	prod := h.kafka.Client(t, kgo.DefaultProduceTopic(h.topic), tr.KgoOpt())
	ctx, sp := tr.StartEnqueue(context.Background(), "test.op", "traced-1")
	if _, err := Enqueue(ctx, prod, NewJob{Type: "test.op", Key: "traced-1"}); err != nil {
		t.Fatal(err)
	}
	sp.End("ok", nil)
	traceID := sp.Span().SpanContext().TraceID()
	testkit.Eventually(t, 20*time.Second, "the first job", func() bool { return w.Stats().Succeeded == 1 })
	if _, err := Enqueue(context.Background(), prod, NewJob{Type: "test.op", Key: "traced-1"}); err != nil {
		t.Fatal(err)
	}
	if _, err := Enqueue(context.Background(), prod, NewJob{Type: "test.op", Key: "traced-2", Payload: []byte("poison")}); err != nil {
		t.Fatal(err)
	}
	testkit.Eventually(t, 20*time.Second, "the duplicate and the poison job", func() bool {
		s := w.Stats()
		return s.Replayed == 1 && s.DeadLettered == 1
	})

	spans := rec.Ended()
	var jobs []sdktrace.ReadOnlySpan
	children := map[string][]string{} // job span id -> child names
	for _, s := range spans {
		if s.Name() == "process "+h.topic {
			jobs = append(jobs, s)
			for _, a := range s.Attributes() {
				if a.Key == tracing.AttrJobType && a.Value.AsString() != "test.op" {
					t.Errorf("job span %s = %q, want test.op", a.Key, a.Value.AsString())
				}
			}
		}
	}
	for _, s := range spans {
		for _, j := range jobs {
			if s.Parent().SpanID() == j.SpanContext().SpanID() {
				children[j.SpanContext().SpanID().String()] = append(children[j.SpanContext().SpanID().String()], s.Name())
			}
		}
	}
	if len(jobs) != 3 {
		t.Fatalf("%d job spans, want 3 (run, duplicate, poison)", len(jobs))
	}
	var first sdktrace.ReadOnlySpan
	for _, j := range jobs {
		if j.SpanContext().TraceID() == traceID {
			first = j
		}
	}
	if first == nil {
		for _, s := range spans {
			t.Logf("%s trace %s parent %s", s.Name(), s.SpanContext().TraceID(), s.Parent().SpanID())
		}
		t.Fatalf("no job span in the producer's trace %s", traceID)
	}
	got := children[first.SpanContext().SpanID().String()]
	sort.Strings(got)
	if diff := cmp.Diff([]string{"claim", "commit", "handler"}, got); diff != "" {
		t.Errorf("children of the job span (-want +got):\n%s", diff)
	}
	events := map[string]bool{}
	for _, j := range jobs {
		for _, e := range j.Events() {
			events[e.Name] = true
		}
	}
	for _, e := range []string{tracing.EventHeartbeat, tracing.EventDuplicateReplay, tracing.EventDeadLettered} {
		if !events[e] {
			t.Errorf("no %q event on any job span", e)
		}
	}
	var rm metricdata.ResourceMetrics
	if err := reader.Collect(context.Background(), &rm); err != nil {
		t.Fatal(err)
	}
	checkOutcomes(t, spans, &rm)
}
