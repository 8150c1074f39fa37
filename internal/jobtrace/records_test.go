package jobtrace_test

import (
	"context"
	"os"
	"os/exec"
	"testing"

	"github.com/twmb/franz-go/pkg/kgo"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/propagation"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/noop"

	"github.com/leasehold/leasehold/internal/jobtrace"
	"github.com/leasehold/leasehold/outcome"
)

// globalChildEnv runs TestSpansOnlyWhenRecording's part that installs a
// global tracer provider, in a child process: the global cannot be
// uninstalled, and the other tests expect OpenTelemetry's default.
const globalChildEnv = "JOBTRACE_GLOBAL_CHILD"

// TestSpansOnlyWhenRecording: a Tracer on OpenTelemetry's default global
// provider makes no job span and no kotel receive span while no provider is
// installed (nothing would record them), yet carries an incoming trace
// context to the handler; once a program installs a provider, the same
// Tracer makes both. A no-op provider never records; an SDK always may.
func TestSpansOnlyWhenRecording(t *testing.T) {
	if os.Getenv(globalChildEnv) == "1" {
		globalFlip(t)
		return
	}
	t.Run("noop provider", func(t *testing.T) {
		tr, err := jobtrace.New(jobtrace.WithTracerProvider(noop.NewTracerProvider()))
		if err != nil {
			t.Fatal(err)
		}
		if tr.Records() {
			t.Error("a Tracer on a no-op provider says its spans could record")
		}
	})
	t.Run("sdk provider", func(t *testing.T) {
		if f := setup(t); !f.tr.Records() {
			t.Error("a Tracer on an SDK provider says its spans could not record")
		}
	})
	t.Run("global provider installed later", func(t *testing.T) {
		cmd := exec.CommandContext(t.Context(), os.Args[0], "-test.run=^TestSpansOnlyWhenRecording$", "-test.v") //nolint:gosec // the test binary itself
		cmd.Env = append(os.Environ(), globalChildEnv+"=1")
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("child: %v\n%s", err, out)
		}
		t.Logf("child:\n%s", out)
	})
}

// globalFlip is the child's part: before and after otel.SetTracerProvider.
func globalFlip(t *testing.T) {
	prop := propagation.TraceContext{}
	tr, err := jobtrace.New(jobtrace.WithPropagator(prop)) // the global tracer provider
	if err != nil {
		t.Fatal(err)
	}
	if tr.Records() {
		t.Fatal("with no provider installed the Tracer says its spans could record")
	}
	// A record carrying a producer's trace context.
	parent := trace.NewSpanContext(trace.SpanContextConfig{TraceID: trace.TraceID{1}, SpanID: trace.SpanID{2}, TraceFlags: trace.FlagsSampled, Remote: true})
	record := func() *kgo.Record {
		r := &kgo.Record{Topic: "jobs"}
		prop.Inject(trace.ContextWithRemoteSpanContext(context.Background(), parent), propagationRecordCarrier{r})
		return r
	}
	fetched := func(r *kgo.Record) {
		for _, h := range tr.KgoHooks() {
			if b, ok := h.(kgo.HookFetchRecordBuffered); ok {
				b.OnFetchRecordBuffered(r)
			}
		}
		for _, h := range tr.KgoHooks() { // polled: kotel ends the receive span
			if u, ok := h.(kgo.HookFetchRecordUnbuffered); ok {
				u.OnFetchRecordUnbuffered(r, true)
			}
		}
	}

	r := record()
	fetched(r)
	if trace.SpanFromContext(r.Context).SpanContext().IsValid() {
		t.Error("kotel's receive span was started with nothing to record it")
	}
	ctx, job := tr.StartJob(context.Background(), r, "t", "k")
	if job.Span().IsRecording() {
		t.Error("the job span records with no provider installed")
	}
	if got := trace.SpanContextFromContext(ctx); got.TraceID() != parent.TraceID() || got.SpanID() != parent.SpanID() {
		t.Errorf("the job's context carries %v, want the producer's %v", got, parent)
	}
	job.End(outcome.Completed, nil)

	exp := tracetest.NewInMemoryExporter()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp))
	defer func() { _ = tp.Shutdown(context.Background()) }()
	otel.SetTracerProvider(tp)
	if !tr.Records() {
		t.Fatal("after otel.SetTracerProvider the Tracer says its spans could not record")
	}
	r = record()
	fetched(r)
	if sc := trace.SpanContextFromContext(r.Context); !sc.IsValid() || sc.SpanID() == parent.SpanID() {
		t.Error("no receive span after a provider was installed")
	}
	_, job = tr.StartJob(context.Background(), r, "t", "k")
	if !job.Span().IsRecording() {
		t.Error("the job span does not record after a provider was installed")
	}
	job.End(outcome.Completed, nil)
	names := map[string]bool{}
	for _, s := range exp.GetSpans() {
		names[s.Name] = true
		if s.SpanContext.TraceID() != parent.TraceID() {
			t.Errorf("span %s in trace %v, want the producer's %v", s.Name, s.SpanContext.TraceID(), parent.TraceID())
		}
	}
	if !names["process jobs"] || !names["jobs receive"] {
		t.Errorf("spans after installing a provider: %v, want the job span and kotel's receive span", names)
	}
}
