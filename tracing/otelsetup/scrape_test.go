package otelsetup_test

import (
	"bufio"
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/twmb/franz-go/pkg/kgo"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/leasehold/leasehold/internal/jobtrace"
	"github.com/leasehold/leasehold/internal/testkit"
	"github.com/leasehold/leasehold/lease"
	"github.com/leasehold/leasehold/outcome"
	"github.com/leasehold/leasehold/tracing"
	"github.com/leasehold/leasehold/tracing/otelsetup"
)

func scrape(t *testing.T, tel *otelsetup.Telemetry) string {
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
	tel, shutdown, err := otelsetup.Setup(ctx, otelsetup.WithoutGlobal())
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = shutdown(ctx) }()
	tr, err := tracing.New(tracing.WithTelemetry(tel))
	if err != nil {
		t.Fatal(err)
	}
	jobtrace.Of(tr).Metrics().ZeroDeadLettered("missing-key")
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
	for _, o := range outcome.Claims() {
		want = append(want, sample{"leasehold_claims_total", `outcome="` + string(o) + `"`})
	}
	for _, o := range outcome.CompensationSteps() {
		want = append(want, sample{"leasehold_compensations_total", `outcome="` + string(o) + `"`})
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
	_, job := jobtrace.Of(tr).StartJob(ctx, &kgo.Record{Topic: "jobs"}, "t", "k")
	job.DeadLettered("no_key")
	job.End(outcome.DeadLettered, nil)
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

// TestPrometheusNames records every metric, the lease ones through a real
// lease.Manager on the shared Redis, scrapes Setup's /metrics handler and
// checks that the series it serves are exactly those PrometheusNames lists.
func TestPrometheusNames(t *testing.T) {
	clearOTelEnv(t)
	ctx := context.Background()
	tel, shutdown, err := otelsetup.Setup(ctx, otelsetup.WithoutGlobal(), otelsetup.WithSpanExporter(tracetest.NewInMemoryExporter()))
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = shutdown(ctx) }()
	tr, err := tracing.New(tracing.WithTelemetry(tel))
	if err != nil {
		t.Fatal(err)
	}

	// Worker metrics.
	jctx, job := jobtrace.Of(tr).StartJob(ctx, &kgo.Record{Topic: "jobs"}, "t", "k")
	_, c := job.StartClaim(jctx)
	c.End("acquired", nil)
	_, s := job.StartCompensation(jctx, "undo", 1)
	s.End(tracing.OutcomeCompensated, nil)
	job.DeadLettered("no_key")
	job.End(outcome.DeadLettered, nil)
	reg, err := jobtrace.Of(tr).Metrics().ObserveCommitLag(func() []jobtrace.PartitionLag {
		return []jobtrace.PartitionLag{{Topic: "jobs", Partition: 1, Lag: 3}}
	})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = reg.Unregister() }()

	// Lease metrics: acquire, renew, then lose a lease by deleting its key.
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
	l, err := m.Acquire(ctx, "metrics-test")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := m.Acquire(ctx, "metrics-test"); err == nil {
		t.Fatal("second Acquire of a held lease succeeded")
	}
	// At least one renewal (its duration is one of the series): the lease's
	// local deadline moves when a renewal is answered.
	first := l.Deadline()
	testkit.Eventually(t, 10*time.Second, "a renewal", func() bool { return l.Deadline().After(first) })
	if err := rc.Del(ctx, m.Key("metrics-test")).Err(); err != nil {
		t.Fatal(err)
	}
	select {
	case <-l.Done():
	case <-time.After(5 * time.Second):
		t.Fatal("lease not lost 5s after its key was deleted")
	}

	// The lost counter is recorded just after Done closes: scrape until it shows.
	var body string
	for deadline := time.Now().Add(5 * time.Second); ; {
		rec := httptest.NewRecorder()
		tel.MetricsHandler.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/metrics", nil))
		b, _ := io.ReadAll(rec.Result().Body)
		body = string(b)
		// Every cause's series shows from the start at 0: wait for this one's 1.
		if hasSample(body, "leasehold_lease_lost_total", `cause="expired"`, "1") || time.Now().After(deadline) {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	served := map[string]bool{}
	sc := bufio.NewScanner(strings.NewReader(body))
	for sc.Scan() {
		line := sc.Text()
		if line == "" || line[0] == '#' {
			continue
		}
		name := line[:strings.IndexAny(line, "{ ")]
		if strings.HasPrefix(name, "leasehold_") {
			served[name] = true
		}
	}
	var got []string
	for n := range served {
		got = append(got, n)
	}
	want := tracing.PrometheusNames()
	slices.Sort(got)
	slices.Sort(want)
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("leasehold series on /metrics (-PrometheusNames +served):\n%s", diff)
	}
	for _, w := range []struct{ name, label, value string }{
		{"leasehold_lease_lost_total", `cause="expired"`, "1"},
		{"leasehold_lease_held", "", "0"},
		{"leasehold_claims_total", `outcome="acquired"`, "1"},
		{"leasehold_compensations_total", `outcome="compensated"`, "1"},
		{"leasehold_dead_lettered_total", `reason="no_key"`, "1"},
		{"leasehold_commit_lag", `partition="1"`, "3"},
		{"leasehold_job_duration_seconds_count", `job_type="t"`, "1"},
	} {
		if !hasSample(body, w.name, w.label, w.value) {
			t.Errorf("/metrics has no sample %s{..%s..} %s", w.name, w.label, w.value)
		}
	}
	for _, line := range []string{"# TYPE leasehold_job_duration_seconds histogram", "# TYPE leasehold_lease_held gauge", "\ngo_goroutines "} {
		if !strings.Contains(body, line) {
			t.Errorf("/metrics lacks %q", line)
		}
	}
}

// hasSample reports whether the exposition has a sample of name whose labels
// include label and whose value is value.
func hasSample(body, name, label, value string) bool {
	for _, line := range strings.Split(body, "\n") {
		rest, ok := strings.CutPrefix(line, name)
		if !ok || (rest[0] != '{' && rest[0] != ' ') {
			continue
		}
		labels, val := "", rest
		if rest[0] == '{' {
			end := strings.LastIndex(rest, "}")
			labels, val = rest[:end+1], rest[end+1:]
		}
		if strings.Contains(labels, label) && strings.TrimSpace(val) == value {
			return true
		}
	}
	return false
}
