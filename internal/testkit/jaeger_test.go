package testkit

import (
	"context"
	"fmt"
	"os"
	"runtime"
	"strings"
	"testing"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"
)

// TestJaeger starts Jaeger, exports a parent and a child span with an event
// over OTLP/HTTP, and reads them back from the query API.
func TestJaeger(t *testing.T) {
	j := StartJaeger(t)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()

	exp, err := otlptracehttp.New(ctx, otlptracehttp.WithEndpointURL(j.OTLPHTTPEndpoint()+"/v1/traces"))
	if err != nil {
		t.Fatal(err)
	}
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp),
		sdktrace.WithResource(resource.NewSchemaless(attribute.String("service.name", "testkit-jaeger"))))
	pctx, parent := tp.Tracer("t").Start(ctx, "parent")
	_, child := tp.Tracer("t").Start(pctx, "child")
	child.AddEvent("something happened", trace.WithAttributes(attribute.String("k", "v")))
	child.End()
	parent.End()
	if err := tp.Shutdown(ctx); err != nil {
		t.Fatal(err)
	}

	var tr JaegerTrace
	for {
		tr, err = j.Trace(ctx, parent.SpanContext().TraceID().String())
		if err == nil && len(tr.Spans) == 2 {
			break
		}
		if ctx.Err() != nil {
			t.Fatalf("trace not in Jaeger: %v (%d spans)\n%s", err, len(tr.Spans), j.Log())
		}
		time.Sleep(100 * time.Millisecond)
	}
	byName := map[string]JaegerSpan{}
	for _, s := range tr.Spans {
		byName[s.OperationName] = s
	}
	if got, want := byName["child"].Parent(), byName["parent"].SpanID; got != want || want == "" {
		t.Errorf("child's parent %q, want %q", got, want)
	}
	if len(byName["child"].Logs) != 1 {
		t.Fatalf("child has %d logs, want the event", len(byName["child"].Logs))
	}
	if ev, _ := byName["child"].Logs[0].Field("event"); ev != "something happened" {
		t.Errorf("event name %q", ev)
	}
	if v, _ := byName["child"].Logs[0].Field("k"); v != "v" {
		t.Errorf("event attribute k = %q", v)
	}
	if p := tr.Processes[byName["parent"].ProcessID]; p.ServiceName != "testkit-jaeger" {
		t.Errorf("service %q", p.ServiceName)
	}
	svcs, err := j.Services(ctx)
	if err != nil || !strings.Contains(strings.Join(svcs, ","), "testkit-jaeger") {
		t.Errorf("services %v, %v", svcs, err)
	}
	traces, err := j.Traces(ctx, "testkit-jaeger", "", 10)
	if err != nil || len(traces) != 1 {
		t.Errorf("Traces: %d traces, %v", len(traces), err)
	}
	traces, err = j.Traces(ctx, "testkit-jaeger", "child", 10)
	if err != nil || len(traces) != 1 {
		t.Errorf("Traces with operation child: %d traces, %v", len(traces), err)
	}
	traces, err = j.Traces(ctx, "testkit-jaeger", "absent", 10)
	if err != nil || len(traces) != 0 {
		t.Errorf("Traces with operation absent: %d traces, %v", len(traces), err)
	}
}

// A JAEGER_BIN that is not a binary fails the test: it is never skipped.
func TestJaegerBinaryMissing(t *testing.T) {
	t.Setenv("JAEGER_BIN", os.DevNull+"-missing")
	ft := &fatalRecorder{TB: t}
	done := make(chan struct{})
	go func() {
		defer close(done)
		JaegerBinary(ft)
	}()
	<-done
	if !ft.fatal || !strings.Contains(ft.msg, "make jaeger") {
		t.Errorf("JaegerBinary with a missing JAEGER_BIN: fatal=%v %q", ft.fatal, ft.msg)
	}
}

// fatalRecorder records a Fatalf and ends the goroutine, as testing does.
type fatalRecorder struct {
	testing.TB
	fatal bool
	msg   string
}

func (f *fatalRecorder) Fatalf(format string, args ...any) {
	f.fatal, f.msg = true, fmt.Sprintf(format, args...)
	runtime.Goexit()
}
