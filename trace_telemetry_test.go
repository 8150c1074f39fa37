package leasehold

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"go.opentelemetry.io/otel"
	metricnoop "go.opentelemetry.io/otel/metric/noop"
	"go.opentelemetry.io/otel/propagation"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"
	tracenoop "go.opentelemetry.io/otel/trace/noop"

	"github.com/leasehold/leasehold/compensation"
	"github.com/leasehold/leasehold/internal/deadletter"
	"github.com/leasehold/leasehold/internal/testkit"
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
	for _, r := range deadletter.Reasons() {
		if v, ok := got[r]; !ok || v != 0 {
			t.Errorf("leasehold.dead_lettered{reason=%q} = %d (present %v), want 0 at start", r, v, ok)
		}
	}
	if len(deadletter.Reasons()) < 12 {
		t.Errorf("deadletter.Reasons() lists %d reasons, want the 12 Reason* constants", len(deadletter.Reasons()))
	}
}

// TestJobLogsCarryTraceIDs: a worker built without WithLogger logs to
// slog.Default(), and a handler's lines through Job.Logger carry the trace
// and span IDs of the job's span, or, logged with the handler's context, of
// the handler span.
func TestJobLogsCarryTraceIDs(t *testing.T) {
	var buf lockedBuf
	prev := slog.Default()
	slog.SetDefault(slog.New(slog.NewJSONHandler(&buf, nil)))
	t.Cleanup(func() { slog.SetDefault(prev) })

	h := setup(t, 1)
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	t.Cleanup(func() { _ = tp.Shutdown(context.Background()) })
	tr, err := tracing.New(tracing.WithTracerProvider(tp), tracing.WithMeterProvider(metricnoop.NewMeterProvider()))
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	var handlerSpan trace.SpanContext
	w := h.start(t, h.rdb, func(w *Worker) {
		must(t, w.Register("test.op", func(ctx context.Context, j *Job) ([]byte, error) {
			handlerSpan = trace.SpanContextFromContext(ctx)
			j.Logger().Info("job line")
			j.Logger().InfoContext(ctx, "ctx line")
			close(done)
			return nil, nil
		}))
	}, WithTracing(tr))
	if _, err := Enqueue(context.Background(), h.kafka.Client(t, kgo.DefaultProduceTopic(h.topic)),
		NewJob{Type: "test.op", Key: "logged-1"}); err != nil {
		t.Fatal(err)
	}
	select {
	case <-done:
	case <-time.After(20 * time.Second):
		t.Fatal("the job did not run")
	}
	testkit.Eventually(t, 10*time.Second, "the job to finish", func() bool { return w.Stats().Succeeded == 1 })

	var jobSpan trace.SpanContext
	for _, s := range rec.Ended() {
		if s.SpanContext().SpanID() == handlerSpan.SpanID() {
			jobSpan = s.Parent()
		}
	}
	if !jobSpan.IsValid() {
		t.Fatal("no handler span recorded")
	}
	lines := map[string]map[string]any{}
	for _, line := range strings.Split(strings.TrimSpace(buf.String()), "\n") {
		m := map[string]any{}
		if json.Unmarshal([]byte(line), &m) == nil {
			if msg, _ := m["msg"].(string); msg != "" {
				lines[msg] = m
			}
		}
	}
	if lines["worker started"] == nil {
		t.Errorf("no \"worker started\" line in slog.Default()'s output:\n%s", buf.String())
	}
	for msg, want := range map[string]trace.SpanContext{"job line": jobSpan, "ctx line": handlerSpan} {
		l := lines[msg]
		if l == nil {
			t.Errorf("no %q line in slog.Default()'s output:\n%s", msg, buf.String())
			continue
		}
		if l[tracing.LogTraceID] != want.TraceID().String() || l[tracing.LogSpanID] != want.SpanID().String() {
			t.Errorf("%q: trace_id %v span_id %v, want %s %s", msg, l[tracing.LogTraceID], l[tracing.LogSpanID],
				want.TraceID(), want.SpanID())
		}
		if l["key"] != "logged-1" || l["job_type"] != "test.op" {
			t.Errorf("%q lacks the job's key and type: %v", msg, l)
		}
	}
}

type lockedBuf struct {
	mu sync.Mutex
	b  strings.Builder
}

func (b *lockedBuf) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.Write(p)
}

func (b *lockedBuf) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.String()
}

// TestOneTelemetrySetting: the providers given once to the worker reach every
// layer: the job's claim and handler spans, the lease manager's spans and
// metrics, the compensation step's span, and the producer span of Enqueue on
// the worker's client (a child of the caller's span). The OpenTelemetry
// globals, set to recorders of their own, see nothing.
func TestOneTelemetrySetting(t *testing.T) {
	h := setup(t, 1)
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	reader := sdkmetric.NewManualReader()
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
	globalRec := tracetest.NewSpanRecorder()
	globalTP := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(globalRec))
	globalReader := sdkmetric.NewManualReader()
	globalMP := sdkmetric.NewMeterProvider(sdkmetric.WithReader(globalReader))
	prevTP, prevMP := otel.GetTracerProvider(), otel.GetMeterProvider()
	otel.SetTracerProvider(globalTP)
	otel.SetMeterProvider(globalMP)
	t.Cleanup(func() {
		otel.SetTracerProvider(prevTP)
		otel.SetMeterProvider(prevMP)
		for _, p := range []interface{ Shutdown(context.Context) error }{tp, mp, globalTP, globalMP} {
			_ = p.Shutdown(context.Background())
		}
	})

	ended := func(r *tracetest.SpanRecorder, prefix string) []sdktrace.ReadOnlySpan {
		var out []sdktrace.ReadOnlySpan
		for _, s := range r.Ended() {
			if strings.HasPrefix(s.Name(), prefix) {
				out = append(out, s)
			}
		}
		return out
	}
	reg := compensation.NewRegistry()
	compensation.MustRegister(reg, "test.undo", func(context.Context, refundArgs) error { return nil })
	handler := func(ctx context.Context, j *Job) ([]byte, error) {
		if err := j.Step(ctx, "charge", func(context.Context) error { return nil }, "test.undo", refundArgs{Key: j.Key}); err != nil {
			return nil, err
		}
		// Hold the lease until the renewer has renewed it once.
		testkit.Eventually(t, 10*time.Second, "a lease renewal span", func() bool { return len(ended(rec, "lease.renew")) > 0 })
		return nil, Permanent(errors.New("give up"))
	}
	w := h.start(t, h.rdb, func(w *Worker) { must(t, w.Register("test.op", handler)) },
		WithTracerProvider(tp), WithMeterProvider(mp), WithPropagator(propagation.TraceContext{}), WithCompensation(reg))

	ctx, caller := tp.Tracer("test").Start(context.Background(), "caller")
	if _, err := Enqueue(ctx, w.Client(), NewJob{Type: "test.op", Key: "one-setting", Topic: h.topic}); err != nil {
		t.Fatal(err)
	}
	caller.End()
	testkit.Eventually(t, 20*time.Second, "the job to fail and be compensated", func() bool {
		return w.Stats().Failed == 1 && len(ended(rec, tracing.SpanCompensation+" ")) > 0
	})

	enq := ended(rec, tracing.SpanEnqueue+" test.op")
	if len(enq) != 1 || enq[0].Parent().SpanID() != caller.SpanContext().SpanID() {
		t.Errorf("enqueue spans %v, want one, a child of the caller's span", enq)
	}
	for _, name := range []string{"claim", "handler", "lease.", tracing.SpanCompensation + " ", "process " + h.topic} {
		if len(ended(rec, name)) == 0 {
			t.Errorf("no %q span from the worker's tracer provider", name)
		}
	}
	if n := len(globalRec.Ended()); n != 0 {
		t.Errorf("the global tracer provider recorded %d spans, want none", n)
	}
	var rm metricdata.ResourceMetrics
	if err := reader.Collect(context.Background(), &rm); err != nil {
		t.Fatal(err)
	}
	names := map[string]bool{}
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			names[m.Name] = true
		}
	}
	for _, m := range []string{tracing.MetricLeaseHeld, tracing.MetricDeadLettered} {
		if !names[m] {
			t.Errorf("no %s from the worker's meter provider (got %v)", m, names)
		}
	}
	checkOutcomes(t, rec.Ended(), &rm)
	if err := globalReader.Collect(context.Background(), &rm); err != nil {
		t.Fatal(err)
	}
	if len(rm.ScopeMetrics) != 0 {
		t.Errorf("the global meter provider has %d scopes of metrics, want none", len(rm.ScopeMetrics))
	}
}
