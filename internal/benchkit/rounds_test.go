package benchkit_test

import (
	"context"
	"log/slog"
	"slices"
	"strconv"
	"testing"
	"time"

	"go.opentelemetry.io/otel/attribute"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"

	"github.com/leasehold/leasehold/internal/benchkit"
	"github.com/leasehold/leasehold/internal/testkit"
	"github.com/leasehold/leasehold/lease"
)

func TestRoundTimerPicksFullRounds(t *testing.T) {
	rt := benchkit.NewRoundTimer(3)
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rt))
	defer func() { _ = tp.Shutdown(context.Background()) }()
	tr := tp.Tracer("test")
	t0 := time.Now()
	span := func(name string, d time.Duration, attrs ...attribute.KeyValue) {
		_, s := tr.Start(context.Background(), name, trace.WithTimestamp(t0), trace.WithAttributes(attrs...))
		s.End(trace.WithTimestamp(t0.Add(d)))
	}
	span("lease.renew", 5*time.Millisecond, attribute.Int("lease.count", 3))
	span("lease.renew", 7*time.Millisecond, attribute.Int("lease.count", 2))   // not all leases
	span("lease.acquire", 9*time.Millisecond, attribute.Int("lease.count", 3)) // not a renewal
	span("lease.renew", 11*time.Millisecond)                                   // no count
	span("lease.renew", 13*time.Millisecond, attribute.Int("lease.count", 3))

	if n := rt.Rounds(); n != 2 {
		t.Fatalf("Rounds() = %d, want 2", n)
	}
	if got, want := rt.Durations(), []time.Duration{5 * time.Millisecond, 13 * time.Millisecond}; !slices.Equal(got, want) {
		t.Fatalf("Durations() = %v, want %v", got, want)
	}
	if got, want := rt.Counts(), []int{3, 2, 3}; !slices.Equal(got, want) {
		t.Fatalf("Counts() = %v, want %v", got, want)
	}
}

// TestRoundTimerOnRenewer checks the span and attribute names against the
// lease renewer itself.
func TestRoundTimerOnRenewer(t *testing.T) {
	c, prefix := testkit.SharedRedis(t)
	const n = 5
	rt := benchkit.NewRoundTimer(n)
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rt))
	defer func() { _ = tp.Shutdown(context.Background()) }()
	m, err := lease.NewManager(c, lease.WithPrefix(prefix), lease.WithTTL(600*time.Millisecond),
		lease.WithTracerProvider(tp), lease.WithLogger(slog.New(slog.DiscardHandler)))
	if err != nil {
		t.Fatalf("NewManager: %v", err)
	}
	if err := m.Start(t.Context()); err != nil {
		t.Fatalf("Start: %v", err)
	}
	defer func() { _ = m.Shutdown(context.Background()) }()
	if err := benchkit.Parallel(n, n, func(i int) error {
		_, err := m.Acquire(t.Context(), "l"+strconv.Itoa(i))
		return err
	}); err != nil {
		t.Fatalf("Acquire: %v", err)
	}
	deadline := time.Now().Add(20 * m.RenewInterval())
	for rt.Rounds() < 2 {
		if time.Now().After(deadline) {
			t.Fatalf("%d full rounds after 20 renew intervals (renew spans seen: %v)", rt.Rounds(), rt.Counts())
		}
		time.Sleep(m.RenewInterval() / 4)
	}
	for _, d := range rt.Durations() {
		if d <= 0 || d > m.RenewInterval() {
			t.Fatalf("round of %v, want between 0 and the renew interval %v", d, m.RenewInterval())
		}
	}
}
