package tracing_test

import (
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"strings"
	"testing"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"

	"github.com/leasehold/leasehold/tracing"
)

func jsonLines(t *testing.T, b *bytes.Buffer) []map[string]any {
	t.Helper()
	var out []map[string]any
	for _, line := range strings.Split(strings.TrimSpace(b.String()), "\n") {
		m := map[string]any{}
		if err := json.Unmarshal([]byte(line), &m); err != nil {
			t.Fatalf("%q: %v", line, err)
		}
		out = append(out, m)
	}
	return out
}

func TestLogHandler(t *testing.T) {
	tp := sdktrace.NewTracerProvider()
	defer func() { _ = tp.Shutdown(context.Background()) }()
	ctx, sp := tp.Tracer("t").Start(context.Background(), "job")
	defer sp.End()
	_, other := tp.Tracer("t").Start(context.Background(), "other")
	defer other.End()
	sc := sp.SpanContext()

	var b bytes.Buffer
	// Wrapped twice: the IDs are added once.
	log := slog.New(tracing.NewLogHandler(tracing.NewLogHandler(slog.NewJSONHandler(&b, nil)))).With("svc", "w")
	log.InfoContext(ctx, "in span")
	log.Info("no context")
	log.InfoContext(context.Background(), "no span")
	fb := slog.New(tracing.NewLogHandlerWithSpan(log.Handler(), other.SpanContext()))
	fb.Info("fallback")
	fb.InfoContext(ctx, "context wins")

	lines := jsonLines(t, &b)
	if len(lines) != 5 {
		t.Fatalf("%d lines, want 5:\n%s", len(lines), b.String())
	}
	want := []struct{ trace, span string }{
		{sc.TraceID().String(), sc.SpanID().String()},
		{"", ""},
		{"", ""},
		{other.SpanContext().TraceID().String(), other.SpanContext().SpanID().String()},
		{sc.TraceID().String(), sc.SpanID().String()},
	}
	for i, l := range lines {
		gotT, _ := l[tracing.LogTraceID].(string)
		gotS, _ := l[tracing.LogSpanID].(string)
		if gotT != want[i].trace || gotS != want[i].span {
			t.Errorf("line %q: trace_id %q span_id %q, want %q %q", l["msg"], gotT, gotS, want[i].trace, want[i].span)
		}
		if l["svc"] != "w" {
			t.Errorf("line %q lost the With attribute: %v", l["msg"], l)
		}
	}
	if strings.Count(strings.Split(b.String(), "\n")[0], tracing.LogTraceID) != 1 {
		t.Errorf("trace_id not exactly once: %s", strings.Split(b.String(), "\n")[0])
	}
}
