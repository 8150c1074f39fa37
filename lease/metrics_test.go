package lease_test

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"go.opentelemetry.io/otel/codes"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/leasehold/leasehold/internal/leasing"
	"github.com/leasehold/leasehold/lease"
)

func TestMetrics(t *testing.T) {
	t.Parallel()
	reader := sdkmetric.NewManualReader()
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
	defer func() { _ = mp.Shutdown(context.Background()) }()
	const interval = 100 * time.Millisecond
	m, c, _ := setup(t, lease.WithTTL(time.Second), lease.WithRenewInterval(interval), lease.WithMeterProvider(mp))
	ctx := context.Background()

	a, b := acquire(t, m, "a"), acquire(t, m, "b")
	if _, err := m.Acquire(ctx, "a"); err == nil {
		t.Fatal("acquired a held lease")
	}
	steal(t, c, m.Key("b"))
	waitDone(t, b, 5*time.Second)

	// The instruments are recorded around the renewal round that found b
	// stolen, not all before Done closed: collect until they show.
	want := map[string]int64{
		"leasehold.lease.held":                     1,
		"leasehold.lease.lost cause=stolen":        1,
		"leasehold.lease.acquire outcome=acquired": 2,
		"leasehold.lease.acquire outcome=held":     1,
	}
	var got map[string]int64
	settled := func() bool {
		got = collect(ctx, t, reader)
		for k, w := range want {
			if got[k] != w {
				return false
			}
		}
		return got["leasehold.lease.renew.duration"] > 0
	}
	for deadline := time.Now().Add(10 * time.Second); !settled() && time.Now().Before(deadline); {
		time.Sleep(10 * time.Millisecond)
	}
	for k, w := range want {
		if got[k] != w {
			t.Errorf("%s = %d, want %d (all: %v)", k, got[k], w, got)
		}
	}
	if got["leasehold.lease.renew.duration"] == 0 {
		t.Errorf("no renew duration recorded: %v", got)
	}
	if err := a.Release(ctx); err != nil {
		t.Fatal(err)
	}
}

// collect reads reader's metrics: a sum's points by name and attributes
// ("name key=value ..."), a histogram's count by name.
func collect(ctx context.Context, t *testing.T, reader *sdkmetric.ManualReader) map[string]int64 {
	t.Helper()
	var rm metricdata.ResourceMetrics
	if err := reader.Collect(ctx, &rm); err != nil {
		t.Fatal(err)
	}
	got := map[string]int64{}
	for _, sm := range rm.ScopeMetrics {
		for _, mt := range sm.Metrics {
			switch d := mt.Data.(type) {
			case metricdata.Sum[int64]:
				for _, p := range d.DataPoints {
					k := mt.Name
					for _, kv := range p.Attributes.ToSlice() {
						k += " " + string(kv.Key) + "=" + kv.Value.AsString()
					}
					got[k] += p.Value
				}
			case metricdata.Histogram[float64]:
				for _, p := range d.DataPoints {
					got[mt.Name] += int64(p.Count)
				}
			}
		}
	}
	return got
}

func TestSpans(t *testing.T) {
	t.Parallel()
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	defer func() { _ = tp.Shutdown(context.Background()) }()
	m, _, _ := setup(t, lease.WithTTL(time.Second), lease.WithTracerProvider(tp))

	ctx, parent := tp.Tracer("test").Start(context.Background(), "job")
	l := acquire(t, m, "a")
	l2, err := m.Acquire(ctx, "b")
	if err != nil {
		t.Fatal(err)
	}
	if got := trace.SpanContextFromContext(l2.Context()).SpanID(); got != parent.SpanContext().SpanID() {
		t.Fatalf("the lease's context carries span %s, want the caller's %s", got, parent.SpanContext().SpanID())
	}
	if _, err := m.Acquire(ctx, "a"); err == nil {
		t.Fatal("acquired a held lease")
	}
	if err := l.Release(ctx); err != nil {
		t.Fatal(err)
	}
	parent.End()

	var (
		names []string
		ended []sdktrace.ReadOnlySpan
	)
	for _, s := range rec.Ended() {
		if s.Name() == "lease.renew" { // a round, if the machine was slow enough
			continue
		}
		ended = append(ended, s)
		names = append(names, s.Name())
		for _, a := range s.Attributes() {
			for _, tok := range []string{leasing.Token(l), leasing.Token(l2)} {
				if a.Value.String() == tok {
					t.Errorf("span %s carries an owner token in %s", s.Name(), a.Key)
				}
			}
		}
		if s.Name() == "lease.acquire" && s.Parent().SpanID() == parent.SpanContext().SpanID() {
			var attrs []string
			for _, a := range s.Attributes() {
				attrs = append(attrs, string(a.Key))
			}
			if !slices.Contains(attrs, "lease.name") {
				t.Errorf("lease.acquire attributes %v", attrs)
			}
		}
	}
	want := []string{"lease.acquire", "lease.acquire", "lease.acquire", "lease.release", "job"}
	if diff := cmp.Diff(want, names); diff != "" {
		t.Fatalf("ended spans (-want +got):\n%s", diff)
	}
	if s := ended[2]; s.Status().Code != codes.Error {
		t.Fatalf("refused acquire span status %v", s.Status())
	}
}
