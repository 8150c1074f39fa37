package otelsetup_test

import (
	"bytes"
	"context"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.opentelemetry.io/otel"

	"github.com/leasehold/leasehold/tracing/otelsetup"
)

// lockedBuffer is a bytes.Buffer safe for a logger and a test to share.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.Write(p)
}

func (b *lockedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.String()
}

// restoreOTelGlobals puts back the globals that Setup replaces.
func restoreOTelGlobals(t *testing.T) {
	t.Helper()
	tp, mp, prop := otel.GetTracerProvider(), otel.GetMeterProvider(), otel.GetTextMapPropagator()
	t.Cleanup(func() {
		otel.SetTracerProvider(tp)
		otel.SetMeterProvider(mp)
		otel.SetTextMapPropagator(prop)
		otel.SetErrorHandler(otel.ErrorHandlerFunc(func(error) {}))
	})
}

// TestSetupNoCollectorConfigured: without OTEL_TRACES_EXPORTER and without an
// OTLP endpoint, Setup exports nothing (no attempt at the default
// localhost:4318, no warning, a clean shutdown), yet spans still get IDs for
// propagation and log correlation.
func TestSetupNoCollectorConfigured(t *testing.T) {
	clearOTelEnv(t)
	restoreOTelGlobals(t)
	t.Setenv("OTEL_EXPORTER_OTLP_TIMEOUT", "300")
	// Listen on the OTLP/HTTP default port if it is free, to see any attempt.
	var hits atomic.Int64
	if lis, err := net.Listen("tcp", "127.0.0.1:4318"); err == nil {
		srv := &http.Server{Handler: http.HandlerFunc(func(http.ResponseWriter, *http.Request) { hits.Add(1) }),
			ReadHeaderTimeout: time.Second}
		go func() { _ = srv.Serve(lis) }()
		defer func() { _ = srv.Close() }()
	}
	var logs lockedBuffer
	ctx := context.Background()
	tel, shutdown, err := otelsetup.Setup(ctx, otelsetup.WithSetupLogger(slog.New(slog.NewTextHandler(&logs, nil))))
	if err != nil {
		t.Fatal(err)
	}
	_, sp := tel.TracerProvider.Tracer("t").Start(ctx, "unexported")
	sp.End()
	if !sp.SpanContext().IsValid() {
		t.Error("span without an exporter has no valid span context")
	}
	if err := shutdown(ctx); err != nil {
		t.Errorf("shutdown without a collector configured: %v", err)
	}
	if n := hits.Load(); n != 0 {
		t.Errorf("%d export requests to 127.0.0.1:4318 though no endpoint is configured", n)
	}
	if s := logs.String(); s != "" {
		t.Errorf("logged without a collector configured:\n%s", s)
	}
}

// TestSetupUnreachableCollectorWarnsOnce: an OTLP endpoint that refuses
// connections fails every export; that is one warning, not one per export.
func TestSetupUnreachableCollectorWarnsOnce(t *testing.T) {
	clearOTelEnv(t)
	restoreOTelGlobals(t)
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := lis.Addr().String()
	_ = lis.Close() // nothing listens there now: connection refused
	t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", "http://"+addr)
	t.Setenv("OTEL_EXPORTER_OTLP_TIMEOUT", "100")
	t.Setenv("OTEL_BSP_SCHEDULE_DELAY", "20")
	var logs lockedBuffer
	ctx := context.Background()
	tel, shutdown, err := otelsetup.Setup(ctx,
		otelsetup.WithSetupLogger(slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))))
	if err != nil {
		t.Fatal(err)
	}
	tracer := tel.TracerProvider.Tracer("t")
	// Export after export fails: wait for at least three failures.
	deadline := time.Now().Add(20 * time.Second)
	for strings.Count(logs.String(), "\n") < 3 && time.Now().Before(deadline) {
		_, sp := tracer.Start(ctx, "lost")
		sp.End()
		time.Sleep(20 * time.Millisecond)
	}
	_ = shutdown(ctx)
	out := logs.String()
	if n := strings.Count(out, "\n"); n < 3 {
		t.Fatalf("%d errors logged in 20s of failing exports, want at least 3:\n%s", n, out)
	}
	if n := strings.Count(out, "level=WARN"); n != 1 {
		t.Errorf("%d warnings for an unreachable collector, want 1:\n%s", n, out)
	}
	if !strings.Contains(out, addr) {
		t.Errorf("the warning does not name the endpoint %s:\n%s", addr, out)
	}
}
