package tracing_test

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/leasehold/leasehold/internal/testkit"
	"github.com/leasehold/leasehold/lease"
	"github.com/leasehold/leasehold/tracing"
)

func scrape(t *testing.T, tel *tracing.Telemetry) string {
	t.Helper()
	rec := httptest.NewRecorder()
	tel.MetricsHandler.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/metrics", nil))
	b, err := io.ReadAll(rec.Result().Body)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// TestMetricsAtStart scrapes /metrics right after the tracer and a lease
// manager are made, before anything happened: every counter series of a
// known label value is there at 0, and no series carries otel_scope_* labels.
func TestMetricsAtStart(t *testing.T) {
	clearOTelEnv(t)
	ctx := context.Background()
	tel, shutdown, err := tracing.Setup(ctx, tracing.WithoutGlobal())
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = shutdown(ctx) }()
	tr, err := tracing.New(tracing.WithTelemetry(tel))
	if err != nil {
		t.Fatal(err)
	}
	tr.Metrics().ZeroDeadLettered("missing-key")
	rc, prefix := testkit.SharedRedis(t)
	m, err := lease.NewManager(rc, lease.WithPrefix(prefix), lease.WithTTL(time.Second),
		lease.WithMeterProvider(tel.MeterProvider))
	if err != nil {
		t.Fatal(err)
	}
	if err := m.Start(ctx); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = m.Shutdown(ctx) }()

	body := scrape(t, tel)
	type sample struct{ name, label string }
	want := []sample{{"leasehold_dead_lettered_total", `reason="missing-key"`}}
	for _, o := range tracing.ClaimOutcomes {
		want = append(want, sample{"leasehold_claims_total", `outcome="` + o + `"`})
	}
	for _, o := range tracing.CompensationOutcomes {
		want = append(want, sample{"leasehold_compensations_total", `outcome="` + o + `"`})
	}
	for _, c := range []string{"stolen", "expired", "renew_deadline", "fenced", "other"} {
		want = append(want, sample{"leasehold_lease_lost_total", `cause="` + c + `"`})
	}
	for _, o := range []string{"acquired", "held", "error"} {
		want = append(want, sample{"leasehold_lease_acquire_total", `outcome="` + o + `"`})
	}
	for _, w := range want {
		if !hasSample(body, w.name, w.label, "0") {
			t.Errorf("/metrics at start has no sample %s{%s} 0", w.name, w.label)
		}
	}
	// One series that was counted, so that the check below sees a series
	// even if none is made at start.
	_, job := tr.StartJob(ctx, &kgo.Record{Topic: "jobs"}, "t", "k")
	job.DeadLettered("no_key")
	job.End(tracing.OutcomeDeadLettered, nil)
	body = scrape(t, tel)
	if !hasSample(body, "leasehold_dead_lettered_total", `reason="no_key"`, "1") {
		t.Errorf("/metrics has no leasehold_dead_lettered_total{reason=\"no_key\"} 1")
	}
	for _, line := range strings.Split(body, "\n") {
		if strings.Contains(line, "otel_scope_") {
			t.Errorf("/metrics line with an otel_scope_ label: %s", line)
		}
	}
}
