package tracing_test

import (
	"bufio"
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/twmb/franz-go/pkg/kgo"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/leasehold/leasehold/internal/testkit"
	"github.com/leasehold/leasehold/lease"
	"github.com/leasehold/leasehold/tracing"
)

// collect returns every data point of the manual reader as
// "name{k=v,...}" -> value (sum or gauge value, histogram count).
func (f *fixture) collect(t *testing.T) map[string]float64 {
	t.Helper()
	var rm metricdata.ResourceMetrics
	if err := f.reader.Collect(context.Background(), &rm); err != nil {
		t.Fatal(err)
	}
	out := map[string]float64{}
	key := func(name string, set attribute.Set) string {
		var kv []string
		for _, a := range set.ToSlice() {
			kv = append(kv, string(a.Key)+"="+a.Value.String())
		}
		return name + "{" + strings.Join(kv, ",") + "}"
	}
	for _, sm := range rm.ScopeMetrics {
		if sm.Scope.Name != "github.com/leasehold/leasehold" {
			continue // kotel's broker metrics
		}
		for _, m := range sm.Metrics {
			switch d := m.Data.(type) {
			case metricdata.Sum[int64]:
				for _, p := range d.DataPoints {
					out[key(m.Name, p.Attributes)] = float64(p.Value)
				}
			case metricdata.Gauge[int64]:
				for _, p := range d.DataPoints {
					out[key(m.Name, p.Attributes)] = float64(p.Value)
				}
			case metricdata.Histogram[float64]:
				for _, p := range d.DataPoints {
					out[key(m.Name, p.Attributes)+" count"] = float64(p.Count)
					out[key(m.Name, p.Attributes)+" sum"] = p.Sum
				}
			default:
				t.Fatalf("unexpected data %T for %s", m.Data, m.Name)
			}
		}
	}
	return out
}

func TestMetricsFromSpans(t *testing.T) {
	var mu sync.Mutex
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	clock := func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
	advance := func(d time.Duration) { mu.Lock(); now = now.Add(d); mu.Unlock() }
	f := setup(t, tracing.WithClock(clock))

	run := func(typ, claimOutcome, outcome string, d time.Duration, comps ...string) {
		ctx, job := f.tr.StartJob(context.Background(), &kgo.Record{Topic: "jobs"}, typ, "k")
		if claimOutcome != "" {
			_, c := job.StartClaim(ctx)
			c.End(claimOutcome, nil)
		}
		for _, o := range comps {
			_, s := job.StartCompensation(ctx, "undo", 1)
			s.End(o, nil)
		}
		if outcome == tracing.OutcomeDeadLettered {
			job.DeadLettered("retries_exhausted")
		}
		advance(d)
		job.End(outcome, nil)
	}
	run("transcode", "acquired", tracing.OutcomeCompleted, 3*time.Second)
	run("transcode", "acquired", tracing.OutcomeCompleted, 5*time.Second)
	run("transcode", "takeover", tracing.OutcomeLeaseLost, time.Second, tracing.OutcomeCompensated, tracing.OutcomeCompensated, tracing.OutcomeFailed)
	run("report", "duplicate", tracing.OutcomeDuplicate, 0) // no duration: the job did not run
	run("", "", tracing.OutcomeDeadLettered, time.Second)   // rejected before a claim: no duration
	run("report", "acquired", tracing.OutcomeDeadLettered, 2*time.Second)

	lags := []tracing.PartitionLag{{Topic: "jobs", Partition: 0, Lag: 7}, {Topic: "jobs", Partition: 3, Lag: 0}}
	var lagMu sync.Mutex
	reg, err := f.tr.Metrics().ObserveCommitLag(func() []tracing.PartitionLag {
		lagMu.Lock()
		defer lagMu.Unlock()
		return slices.Clone(lags)
	})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = reg.Unregister() }()

	want := map[string]float64{
		"leasehold.claims{outcome=acquired}":                                  3,
		"leasehold.claims{outcome=takeover}":                                  1,
		"leasehold.claims{outcome=duplicate}":                                 1,
		"leasehold.compensations{outcome=compensated}":                        2,
		"leasehold.compensations{outcome=failed}":                             1,
		"leasehold.dead_lettered{reason=retries_exhausted}":                   2,
		"leasehold.job.duration{job_type=transcode,outcome=completed} count":  2,
		"leasehold.job.duration{job_type=transcode,outcome=completed} sum":    8,
		"leasehold.job.duration{job_type=transcode,outcome=lease_lost} count": 1,
		"leasehold.job.duration{job_type=transcode,outcome=lease_lost} sum":   1,
		"leasehold.job.duration{job_type=report,outcome=dead_lettered} count": 1,
		"leasehold.job.duration{job_type=report,outcome=dead_lettered} sum":   2,
		"leasehold.commit.lag{partition=0,topic=jobs}":                        7,
		"leasehold.commit.lag{partition=3,topic=jobs}":                        0,
	}
	// Claim and compensation outcomes that never happened read 0 (they exist
	// from the start; see TestMetricsAtStart).
	for _, o := range tracing.ClaimOutcomes {
		want["leasehold.claims{outcome="+o+"}"] += 0
	}
	for _, o := range tracing.CompensationOutcomes {
		want["leasehold.compensations{outcome="+o+"}"] += 0
	}
	if diff := cmp.Diff(want, f.collect(t)); diff != "" {
		t.Errorf("metrics (-want +got):\n%s", diff)
	}

	// A revoked partition disappears from the commit lag.
	lagMu.Lock()
	lags = lags[:1]
	lagMu.Unlock()
	got := f.collect(t)
	if _, ok := got["leasehold.commit.lag{partition=3,topic=jobs}"]; ok {
		t.Error("commit lag of a partition no longer reported is still exported")
	}
}

func TestMetricsJobTypeCardinality(t *testing.T) {
	f := setup(t)
	for i := range 300 {
		f.tr.Metrics().JobDone(context.Background(), "type-"+strconv.Itoa(i), tracing.OutcomeCompleted, time.Millisecond)
	}
	types := map[string]bool{}
	for k := range f.collect(t) {
		if i := strings.Index(k, "job_type="); i >= 0 {
			types[strings.SplitN(k[i+len("job_type="):], ",", 2)[0]] = true
		}
	}
	if len(types) != 257 || !types[tracing.OtherJobType] {
		t.Errorf("%d job_type values (other present: %v), want 256 + %q", len(types), types[tracing.OtherJobType], tracing.OtherJobType)
	}
}

// TestPrometheusNames records every metric, the lease ones through a real
// lease.Manager on the shared Redis, scrapes Setup's /metrics handler and
// checks that the series it serves are exactly those PrometheusNames lists.
func TestPrometheusNames(t *testing.T) {
	clearOTelEnv(t)
	ctx := context.Background()
	tel, shutdown, err := tracing.Setup(ctx, tracing.WithoutGlobal(), tracing.WithSpanExporter(tracetest.NewInMemoryExporter()))
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = shutdown(ctx) }()
	tr, err := tracing.New(tracing.WithTelemetry(tel))
	if err != nil {
		t.Fatal(err)
	}

	// Worker metrics.
	jctx, job := tr.StartJob(ctx, &kgo.Record{Topic: "jobs"}, "t", "k")
	_, c := job.StartClaim(jctx)
	c.End("acquired", nil)
	_, s := job.StartCompensation(jctx, "undo", 1)
	s.End(tracing.OutcomeCompensated, nil)
	job.DeadLettered("no_key")
	job.End(tracing.OutcomeDeadLettered, nil)
	reg, err := tr.Metrics().ObserveCommitLag(func() []tracing.PartitionLag {
		return []tracing.PartitionLag{{Topic: "jobs", Partition: 1, Lag: 3}}
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
	time.Sleep(m.RenewInterval() + 200*time.Millisecond) // at least one renewal
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
