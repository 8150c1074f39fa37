package leasehold

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/twmb/franz-go/pkg/kgo"
	"go.opentelemetry.io/otel/propagation"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"

	"github.com/leasehold/leasehold/compensation"
	"github.com/leasehold/leasehold/idempotency"
	"github.com/leasehold/leasehold/lease"
	"github.com/leasehold/leasehold/tracing"
)

// TestConflictingOptions: New refuses two options that set one setting to
// different values, with one sentence naming both, and accepts equal values
// given twice. One row per pair of places a setting can be given.
func TestConflictingOptions(t *testing.T) {
	rdb := redis.NewClient(&redis.Options{Addr: "127.0.0.1:6379"}) // New makes no call
	t.Cleanup(func() { _ = rdb.Close() })
	tp1, tp2 := sdktrace.NewTracerProvider(), sdktrace.NewTracerProvider()
	mp1, mp2 := sdkmetric.NewMeterProvider(), sdkmetric.NewMeterProvider()
	t.Cleanup(func() {
		for _, p := range []interface{ Shutdown(context.Context) error }{tp1, tp2, mp1, mp2} {
			_ = p.Shutdown(context.Background())
		}
	})
	tracer := func(opts ...tracing.Opt) *tracing.Tracer {
		tr, err := tracing.New(opts...)
		if err != nil {
			t.Fatal(err)
		}
		return tr
	}
	reg := compensation.NewRegistry()
	onLost := func(context.Context, *kgo.Client, map[string][]int32) {}
	tests := []struct {
		name     string
		opts     []Opt
		conflict []string // both options named; nil: accepted
	}{
		{"lease TTL", []Opt{WithLeaseTTL(10 * time.Second), WithLeaseOptions(lease.WithTTL(5 * time.Second))},
			[]string{"WithLeaseTTL", "lease.WithTTL in WithLeaseOptions"}},
		{"lease TTL equal", []Opt{WithLeaseTTL(5 * time.Second), WithLeaseOptions(lease.WithTTL(5 * time.Second))}, nil},
		{"retention", []Opt{WithRetention(time.Hour), WithIdempotencyOptions(idempotency.WithRetention(2 * time.Hour))},
			[]string{"WithRetention", "idempotency.WithRetention in WithIdempotencyOptions"}},
		{"retention equal", []Opt{WithRetention(time.Hour), WithIdempotencyOptions(idempotency.WithRetention(time.Hour))}, nil},
		{"prefix and lease", []Opt{WithKeyPrefix("a:"), WithLeaseOptions(lease.WithPrefix("b:"))},
			[]string{"WithKeyPrefix", "lease.WithPrefix in WithLeaseOptions"}},
		{"prefix and idempotency", []Opt{WithKeyPrefix("a:"), WithIdempotencyOptions(idempotency.WithPrefix("b:"))},
			[]string{"WithKeyPrefix", "idempotency.WithPrefix in WithIdempotencyOptions"}},
		{"prefix and compensation", []Opt{WithKeyPrefix("a:"), WithCompensation(reg, compensation.WithPrefix("b:"))},
			[]string{"WithKeyPrefix", "compensation.WithPrefix in WithCompensation"}},
		{"lease and idempotency prefixes", []Opt{WithLeaseOptions(lease.WithPrefix("a:")), WithIdempotencyOptions(idempotency.WithPrefix("b:"))},
			[]string{"lease.WithPrefix in WithLeaseOptions", "idempotency.WithPrefix in WithIdempotencyOptions"}},
		{"prefix equal everywhere", []Opt{WithKeyPrefix("a:"), WithLeaseOptions(lease.WithPrefix("a:")),
			WithIdempotencyOptions(idempotency.WithPrefix("a:")), WithCompensation(reg, compensation.WithPrefix("a:"))}, nil},
		{"tracer provider and lease", []Opt{WithTracerProvider(tp1), WithLeaseOptions(lease.WithTracerProvider(tp2))},
			[]string{"WithTracerProvider", "lease.WithTracerProvider in WithLeaseOptions"}},
		{"tracer provider and WithTracing", []Opt{WithTracerProvider(tp1), WithTracing(tracer(tracing.WithTracerProvider(tp2)))},
			[]string{"WithTracerProvider", "WithTracing's Tracer"}},
		{"tracer provider equal", []Opt{WithTracerProvider(tp1), WithLeaseOptions(lease.WithTracerProvider(tp1)),
			WithTracing(tracer(tracing.WithTracerProvider(tp1), tracing.WithMeterProvider(mp1))), WithMeterProvider(mp1)}, nil},
		{"meter provider and lease", []Opt{WithMeterProvider(mp1), WithLeaseOptions(lease.WithMeterProvider(mp2))},
			[]string{"WithMeterProvider", "lease.WithMeterProvider in WithLeaseOptions"}},
		{"meter provider and WithTracing", []Opt{WithMeterProvider(mp1), WithTracing(tracer(tracing.WithMeterProvider(mp2)))},
			[]string{"WithMeterProvider", "WithTracing's Tracer"}},
		{"propagator and WithTracing", []Opt{WithPropagator(propagation.TraceContext{}), WithTracing(tracer(tracing.WithPropagator(propagation.Baggage{})))},
			[]string{"WithPropagator", "WithTracing's Tracer"}},
		{"group", []Opt{WithGroup("a"), WithKafka(kgo.ConsumerGroup("b"))}, []string{"WithGroup", "kgo.ConsumerGroup in WithKafka"}},
		{"group equal", []Opt{WithGroup("a"), WithKafka(kgo.ConsumerGroup("a"))}, nil},
		{"topics", []Opt{WithTopics("a"), WithKafka(kgo.ConsumeTopics("b"))}, []string{"WithTopics", "kgo.ConsumeTopics in WithKafka"}},
		{"topics equal", []Opt{WithTopics("a", "b"), WithKafka(kgo.ConsumeTopics("b", "a"))}, nil},
		{"topic regex", []Opt{WithKafka(kgo.ConsumeRegex())}, []string{"the worker", "kgo.ConsumeRegex in WithKafka"}},
		{"balancers", []Opt{WithKafka(kgo.Balancers(kgo.RangeBalancer()))}, []string{"the worker", "kgo.Balancers in WithKafka"}},
		{"balancers equal", []Opt{WithKafka(kgo.Balancers(kgo.CooperativeStickyBalancer()))}, nil},
		{"reset offset", []Opt{WithKafka(kgo.ConsumeResetOffset(kgo.NewOffset().AtEnd()))}, []string{"the worker", "kgo.ConsumeResetOffset in WithKafka"}},
		{"reset offset equal", []Opt{WithKafka(kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))}, nil},
		{"autocommit interval", []Opt{WithCommitInterval(2 * time.Second), WithKafka(kgo.AutoCommitInterval(3 * time.Second))},
			[]string{"WithCommitInterval", "kgo.AutoCommitInterval in WithKafka"}},
		{"autocommit interval equal", []Opt{WithCommitInterval(2 * time.Second), WithKafka(kgo.AutoCommitInterval(2 * time.Second))}, nil},
		{"autocommit disabled", []Opt{WithKafka(kgo.DisableAutoCommit())}, []string{"the worker", "kgo.DisableAutoCommit in WithKafka"}},
		{"autocommit marks and blocking equal", []Opt{WithKafka(kgo.AutoCommitMarks(), kgo.BlockRebalanceOnPoll())}, nil},
		{"assigned callback", []Opt{WithKafka(kgo.OnPartitionsAssigned(onLost))}, []string{"the worker", "kgo.OnPartitionsAssigned in WithKafka"}},
		{"revoked callback", []Opt{WithKafka(kgo.OnPartitionsRevoked(onLost))}, []string{"the worker", "kgo.OnPartitionsRevoked in WithKafka"}},
		{"lost callback", []Opt{WithKafka(kgo.OnPartitionsLost(onLost))}, []string{"the worker", "kgo.OnPartitionsLost in WithKafka"}},
		{"other kafka options", []Opt{WithKafka(kgo.SeedBrokers("k:9092"), kgo.ClientID("x"), kgo.SessionTimeout(time.Minute))}, nil},
		{"type limit", []Opt{WithTypeLimit("payments.charge", 4), WithTypeLimit("mail.send", 1)}, nil},
		{"type limit zero", []Opt{WithTypeLimit("payments.charge", 0)}, []string{"WithTypeLimit", "payments.charge"}},
		{"type limit without a type", []Opt{WithTypeLimit("", 2)}, []string{"WithTypeLimit"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			_, err := New(rdb, tc.opts...)
			if tc.conflict == nil {
				if err != nil {
					t.Fatalf("New: %v, want no error", err)
				}
				return
			}
			if !errors.Is(err, ErrConflictingOptions) {
				t.Fatalf("New: %v, want ErrConflictingOptions", err)
			}
			msg := err.Error()
			t.Log(msg)
			for _, want := range tc.conflict {
				if !strings.Contains(msg, want) {
					t.Errorf("error %q does not name %q", msg, want)
				}
			}
			if strings.Count(msg, ". ") > 0 || strings.Contains(msg, "\n") {
				t.Errorf("error %q is not one sentence", msg)
			}
		})
	}
}

// TestLayerSettingAdopted: a shared setting given only to a layer is the
// worker's, so the derived settings (renew interval, held backoff, session
// timeout) follow the lease TTL the lease manager really uses.
func TestLayerSettingAdopted(t *testing.T) {
	rdb := redis.NewClient(&redis.Options{Addr: "127.0.0.1:6379"})
	t.Cleanup(func() { _ = rdb.Close() })
	w, err := New(rdb, WithLeaseOptions(lease.WithTTL(6*time.Second), lease.WithPrefix("x:")),
		WithIdempotencyOptions(idempotency.WithRetention(time.Hour)))
	if err != nil {
		t.Fatal(err)
	}
	if w.cfg.leaseTTL != 6*time.Second || w.cfg.keyPrefix != "x:" || w.cfg.retention != time.Hour {
		t.Errorf("lease TTL %v, prefix %q, retention %v; want 6s, x:, 1h from the layers' options",
			w.cfg.leaseTTL, w.cfg.keyPrefix, w.cfg.retention)
	}
	if w.cfg.heldMax != 6*time.Second {
		t.Errorf("held backoff bound %v, want the adopted lease TTL 6s", w.cfg.heldMax)
	}
}
