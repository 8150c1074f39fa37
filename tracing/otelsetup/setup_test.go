package otelsetup_test

import (
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/propagation"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"
	coltracepb "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	"google.golang.org/grpc"
	"google.golang.org/grpc/metadata"
	"google.golang.org/protobuf/proto"

	"github.com/leasehold/leasehold/tracing"
	"github.com/leasehold/leasehold/tracing/otelsetup"
)

// clearOTelEnv unsets every OTEL_* variable for the test, so that the
// developer's environment cannot change its outcome.
func clearOTelEnv(t *testing.T) {
	t.Helper()
	for _, kv := range os.Environ() {
		k, _, _ := strings.Cut(kv, "=")
		if strings.HasPrefix(k, "OTEL_") {
			t.Setenv(k, "")
			_ = os.Unsetenv(k)
		}
	}
}

func resourceAttr(tel *otelsetup.Telemetry, key string) string {
	v, _ := tel.Resource.Set().Value(attribute.Key(key))
	return v.String()
}

func TestSetupResource(t *testing.T) {
	clearOTelEnv(t)
	ctx := context.Background()
	exp := tracetest.NewInMemoryExporter()
	tel, shutdown, err := otelsetup.Setup(ctx, otelsetup.WithoutGlobal(), otelsetup.WithSpanExporter(exp),
		otelsetup.WithServiceName("unit"), otelsetup.WithServiceVersion("v1.2.3"))
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = shutdown(ctx) }()
	host, _ := os.Hostname()
	got := map[string]string{
		"service.name":    resourceAttr(tel, "service.name"),
		"service.version": resourceAttr(tel, "service.version"),
		"host.name":       resourceAttr(tel, "host.name"),
	}
	want := map[string]string{"service.name": "unit", "service.version": "v1.2.3", "host.name": host}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("resource (-want +got):\n%s", diff)
	}
	if v := resourceAttr(tel, "process.command_args"); v != "" {
		t.Errorf("resource records process.command_args %q: it may hold secrets", v)
	}

	// OTEL_SERVICE_NAME wins over the option, as the specification requires.
	t.Setenv("OTEL_SERVICE_NAME", "from-env")
	t.Setenv("OTEL_RESOURCE_ATTRIBUTES", "deployment.environment.name=test")
	tel2, shutdown2, err := otelsetup.Setup(ctx, otelsetup.WithoutGlobal(), otelsetup.WithSpanExporter(tracetest.NewInMemoryExporter()),
		otelsetup.WithServiceName("unit"))
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = shutdown2(ctx) }()
	if got := resourceAttr(tel2, "service.name"); got != "from-env" {
		t.Errorf("service.name = %q with OTEL_SERVICE_NAME=from-env", got)
	}
	if got := resourceAttr(tel2, "deployment.environment.name"); got != "test" {
		t.Errorf("deployment.environment.name = %q from OTEL_RESOURCE_ATTRIBUTES", got)
	}
}

func TestSetupShutdownFlushes(t *testing.T) {
	clearOTelEnv(t)
	// A long batch delay: only the shutdown can have flushed the span.
	t.Setenv("OTEL_BSP_SCHEDULE_DELAY", "600000")
	ctx := context.Background()
	exp := &keepExporter{}
	tel, shutdown, err := otelsetup.Setup(ctx, otelsetup.WithoutGlobal(), otelsetup.WithSpanExporter(exp))
	if err != nil {
		t.Fatal(err)
	}
	_, sp := tel.TracerProvider.Tracer("t").Start(ctx, "one")
	sp.End()
	if got := exp.names(); len(got) != 0 {
		t.Fatalf("exported %v before shutdown; the batch delay should hold them", got)
	}
	if err := shutdown(ctx); err != nil {
		t.Fatal(err)
	}
	if got := exp.names(); !cmp.Equal(got, []string{"one"}) {
		t.Fatalf("after shutdown exported %v, want [one]", got)
	}
	if err := shutdown(ctx); err != nil {
		t.Errorf("second shutdown: %v", err)
	}
}

func TestSetupPropagators(t *testing.T) {
	clearOTelEnv(t)
	ctx := context.Background()
	tel, shutdown, err := otelsetup.Setup(ctx, otelsetup.WithoutGlobal(), otelsetup.WithSpanExporter(tracetest.NewInMemoryExporter()))
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = shutdown(ctx) }()
	fields := tel.Propagator.Fields()
	slices.Sort(fields)
	if diff := cmp.Diff([]string{"baggage", "traceparent", "tracestate"}, fields); diff != "" {
		t.Errorf("propagator fields (-want +got):\n%s", diff)
	}
}

func TestSetupRejectsBadEnv(t *testing.T) {
	for _, tc := range []struct{ key, val string }{
		{"OTEL_TRACES_SAMPLER", "sometimes"},
		{"OTEL_EXPORTER_OTLP_PROTOCOL", "carrier-pigeon"},
		{"OTEL_TRACES_EXPORTER", "nowhere"},
	} {
		t.Run(tc.key, func(t *testing.T) {
			clearOTelEnv(t)
			t.Setenv(tc.key, tc.val)
			_, shutdown, err := otelsetup.Setup(context.Background(), otelsetup.WithoutGlobal())
			if err == nil {
				_ = shutdown(context.Background())
				t.Fatalf("Setup accepted %s=%s", tc.key, tc.val)
			}
			if !errors.Is(err, tracing.ErrConfig) {
				t.Errorf("error %v does not match ErrConfig", err)
			}
		})
	}
}

func TestSetupDisabled(t *testing.T) {
	clearOTelEnv(t)
	t.Setenv("OTEL_SDK_DISABLED", "true")
	ctx := context.Background()
	tel, shutdown, err := otelsetup.Setup(ctx, otelsetup.WithoutGlobal())
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = shutdown(ctx) }()
	_, sp := tel.TracerProvider.Tracer("t").Start(ctx, "x")
	defer sp.End()
	if sp.SpanContext().IsValid() {
		t.Error("OTEL_SDK_DISABLED=true still produces recorded spans")
	}
}

func TestSetupSamplerFromEnv(t *testing.T) {
	clearOTelEnv(t)
	t.Setenv("OTEL_TRACES_SAMPLER", "always_off")
	ctx := context.Background()
	exp := tracetest.NewInMemoryExporter()
	tel, shutdown, err := otelsetup.Setup(ctx, otelsetup.WithoutGlobal(), otelsetup.WithSpanExporter(exp))
	if err != nil {
		t.Fatal(err)
	}
	_, sp := tel.TracerProvider.Tracer("t").Start(ctx, "dropped")
	sp.End()
	if err := shutdown(ctx); err != nil {
		t.Fatal(err)
	}
	if n := len(exp.GetSpans()); n != 0 {
		t.Errorf("OTEL_TRACES_SAMPLER=always_off exported %d spans", n)
	}
}

// TestSetupOTLPHTTP exports through the OTLP/HTTP exporter that Setup builds
// from the environment, to a local receiver, and checks the endpoint,
// headers and span.
func TestSetupOTLPHTTP(t *testing.T) {
	clearOTelEnv(t)
	var (
		mu   sync.Mutex
		auth string
		req  coltracepb.ExportTraceServiceRequest
	)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/v1/traces" {
			http.NotFound(w, r)
			return
		}
		body, _ := io.ReadAll(io.LimitReader(r.Body, 1<<20))
		mu.Lock()
		defer mu.Unlock()
		auth = r.Header.Get("Authorization")
		if err := proto.Unmarshal(body, &req); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		w.Header().Set("Content-Type", "application/x-protobuf")
		_, _ = w.Write(nil)
	}))
	defer srv.Close()
	t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", srv.URL)
	t.Setenv("OTEL_EXPORTER_OTLP_HEADERS", "Authorization=Bearer%20s3cret")
	t.Setenv("OTEL_SERVICE_NAME", "otlp-http-test")

	ctx := context.Background()
	tel, shutdown, err := otelsetup.Setup(ctx, otelsetup.WithoutGlobal())
	if err != nil {
		t.Fatal(err)
	}
	_, sp := tel.TracerProvider.Tracer("t").Start(ctx, "over-http")
	sp.End()
	if err := shutdown(ctx); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	defer mu.Unlock()
	if auth != "Bearer s3cret" {
		t.Errorf("Authorization header = %q, want the one from OTEL_EXPORTER_OTLP_HEADERS", auth)
	}
	if got := exportedNames(&req); !cmp.Equal(got, []string{"otlp-http-test/over-http"}) {
		t.Errorf("exported %v", got)
	}
}

type traceService struct {
	coltracepb.UnimplementedTraceServiceServer
	mu   sync.Mutex
	req  coltracepb.ExportTraceServiceRequest
	auth []string
}

func (s *traceService) Export(ctx context.Context, req *coltracepb.ExportTraceServiceRequest) (*coltracepb.ExportTraceServiceResponse, error) {
	md, _ := metadata.FromIncomingContext(ctx)
	s.mu.Lock()
	defer s.mu.Unlock()
	s.auth = md.Get("x-api-key")
	s.req.ResourceSpans = append(s.req.ResourceSpans, req.ResourceSpans...)
	return &coltracepb.ExportTraceServiceResponse{}, nil
}

// TestSetupOTLPGRPC does the same over gRPC, selected by
// OTEL_EXPORTER_OTLP_PROTOCOL=grpc.
func TestSetupOTLPGRPC(t *testing.T) {
	clearOTelEnv(t)
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	gs := grpc.NewServer()
	svc := &traceService{}
	coltracepb.RegisterTraceServiceServer(gs, svc)
	go func() { _ = gs.Serve(lis) }()
	defer gs.Stop()

	t.Setenv("OTEL_EXPORTER_OTLP_PROTOCOL", "grpc")
	t.Setenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "http://"+lis.Addr().String())
	t.Setenv("OTEL_EXPORTER_OTLP_TRACES_HEADERS", "x-api-key=k1")
	t.Setenv("OTEL_SERVICE_NAME", "otlp-grpc-test")
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	tel, shutdown, err := otelsetup.Setup(ctx, otelsetup.WithoutGlobal())
	if err != nil {
		t.Fatal(err)
	}
	_, sp := tel.TracerProvider.Tracer("t").Start(ctx, "over-grpc")
	sp.End()
	if err := shutdown(ctx); err != nil {
		t.Fatal(err)
	}
	svc.mu.Lock()
	defer svc.mu.Unlock()
	if !cmp.Equal(svc.auth, []string{"k1"}) {
		t.Errorf("x-api-key metadata = %q", svc.auth)
	}
	if got := exportedNames(&svc.req); !cmp.Equal(got, []string{"otlp-grpc-test/over-grpc"}) {
		t.Errorf("exported %v", got)
	}
}

// exportedNames returns "service.name/span name" of every exported span.
func exportedNames(req *coltracepb.ExportTraceServiceRequest) []string {
	var out []string
	for _, rs := range req.ResourceSpans {
		svc := ""
		for _, kv := range rs.GetResource().GetAttributes() {
			if kv.Key == "service.name" {
				svc = kv.GetValue().GetStringValue()
			}
		}
		for _, ss := range rs.ScopeSpans {
			for _, s := range ss.Spans {
				out = append(out, svc+"/"+s.Name)
			}
		}
	}
	return out
}

// The global propagator must be installed by Setup without WithoutGlobal.
func TestSetupInstallsGlobals(t *testing.T) {
	clearOTelEnv(t)
	prevTP, prevProp := otel.GetTracerProvider(), otel.GetTextMapPropagator()
	t.Cleanup(func() { otel.SetTracerProvider(prevTP); otel.SetTextMapPropagator(prevProp) })
	ctx := context.Background()
	_, shutdown, err := otelsetup.Setup(ctx, otelsetup.WithSpanExporter(tracetest.NewInMemoryExporter()))
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = shutdown(ctx) }()
	tp := otel.GetTracerProvider()
	_, sp := tp.Tracer("t").Start(ctx, "g")
	defer sp.End()
	if !sp.SpanContext().IsValid() {
		t.Error("the global tracer provider is not Setup's")
	}
	carrier := propagation.MapCarrier{}
	otel.GetTextMapPropagator().Inject(trace.ContextWithSpan(ctx, sp), carrier)
	if carrier.Get("traceparent") == "" {
		t.Error("the global propagator does not inject traceparent")
	}
}

// keepExporter keeps what it exported after Shutdown (the SDK's
// InMemoryExporter forgets it).
type keepExporter struct {
	mu    sync.Mutex
	spans []sdktrace.ReadOnlySpan
}

func (e *keepExporter) ExportSpans(_ context.Context, spans []sdktrace.ReadOnlySpan) error {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.spans = append(e.spans, spans...)
	return nil
}

func (e *keepExporter) Shutdown(context.Context) error { return nil }

func (e *keepExporter) names() []string {
	e.mu.Lock()
	defer e.mu.Unlock()
	var out []string
	for _, s := range e.spans {
		out = append(out, s.Name())
	}
	return out
}
