package cli

import (
	"bytes"
	"context"
	"log/slog"
	"net"
	"os"
	"strings"
	"sync"
	"testing"

	"github.com/leasehold/leasehold/internal/testkit"
)

// captureDefaultLog sends slog.Default() (where OpenTelemetry's errors go
// unless a command passes its own logger) to a buffer for the test.
func captureDefaultLog(t *testing.T) *syncLog {
	t.Helper()
	prev := slog.Default()
	b := &syncLog{}
	slog.SetDefault(slog.New(slog.NewTextHandler(b, &slog.HandlerOptions{Level: slog.LevelDebug})))
	t.Cleanup(func() { slog.SetDefault(prev) })
	return b
}

type syncLog struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncLog) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncLog) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// unsetOTelEnv unsets every OTEL_* variable for the test. Not parallel: the
// environment and slog.Default() are the process's.
func unsetOTelEnv(t *testing.T) {
	t.Helper()
	for _, kv := range os.Environ() {
		k, _, _ := strings.Cut(kv, "=")
		if strings.HasPrefix(k, "OTEL_") {
			t.Setenv(k, "")
			_ = os.Unsetenv(k)
		}
	}
}

// TestEnqueueTelemetryWarnings: `worker enqueue` with no collector
// configured says nothing about OpenTelemetry (it logged a
// connection-refused warning on every run); with an endpoint that refuses
// connections it warns once, not at every export.
func TestEnqueueTelemetryWarnings(t *testing.T) {
	k := testkit.StartKafka(t)
	topic := k.Topic(t, "otel", 1)
	enq := func(t *testing.T, rate string) (result, string) {
		logs := captureDefaultLog(t)
		r := run(context.Background(), t, nil, "enqueue", "--brokers", strings.Join(k.Brokers(), ","),
			"--topics", topic, "--count", "20", "--rate", rate)
		if r.code != 0 {
			t.Fatalf("enqueue: %+v", r)
		}
		return r, logs.String()
	}

	t.Run("no collector configured", func(t *testing.T) {
		unsetOTelEnv(t)
		r, logs := enq(t, "1000")
		for _, s := range []string{r.stderr, logs} {
			if strings.Contains(s, "opentelemetry") || strings.Contains(s, "refused") {
				t.Errorf("enqueue without a collector configured logged:\n%s", s)
			}
		}
	})

	t.Run("collector unreachable", func(t *testing.T) {
		unsetOTelEnv(t)
		// A collector that hangs up on every connection. The port stays
		// held for the whole test: a port closed to get "connection
		// refused" can be bound by another package's test meanwhile (go test
		// runs packages at once, and several start Jaeger, whose OTLP
		// receiver would take the exports). A CI run saw 0 warnings here;
		// that is the one way found for the exports to succeed.
		lis, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = lis.Close() })
		go func() {
			for {
				conn, err := lis.Accept()
				if err != nil {
					return
				}
				_ = conn.Close()
			}
		}()
		addr := lis.Addr().String()
		t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", "http://"+addr)
		t.Setenv("OTEL_EXPORTER_OTLP_TIMEOUT", "50")
		t.Setenv("OTEL_BSP_SCHEDULE_DELAY", "10")
		// 20 records at 20/s: a second of exports that all fail.
		r, logs := enq(t, "20")
		all := r.stderr + logs
		n := 0
		for _, line := range strings.Split(all, "\n") {
			if strings.Contains(line, "level=WARN") && strings.Contains(line, "opentelemetry") {
				n++
			}
		}
		if n != 1 {
			t.Errorf("%d OpenTelemetry warnings for an unreachable collector, want 1:\n%s", n, all)
		}
	})
}
