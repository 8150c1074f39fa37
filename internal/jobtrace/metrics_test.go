package jobtrace_test

import (
	"context"
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

	"github.com/leasehold/leasehold/internal/jobtrace"
	"github.com/leasehold/leasehold/outcome"
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
	f := setup(t, jobtrace.WithClock(clock))

	run := func(typ, claimOutcome, out string, d time.Duration, comps ...string) {
		ctx, job := f.tr.StartJob(context.Background(), &kgo.Record{Topic: "jobs"}, typ, "k")
		if claimOutcome != "" {
			_, c := job.StartClaim(ctx)
			c.End(claimOutcome, nil)
		}
		for _, o := range comps {
			_, s := job.StartCompensation(ctx, "undo", 1)
			s.End(o, nil)
		}
		if out == jobtrace.OutcomeDeadLettered {
			job.DeadLettered("retries_exhausted")
		}
		advance(d)
		job.End(outcome.Name(out), nil)
	}
	run("transcode", "acquired", jobtrace.OutcomeCompleted, 3*time.Second)
	run("transcode", "acquired", jobtrace.OutcomeCompleted, 5*time.Second)
	run("transcode", "takeover", jobtrace.OutcomeLeaseLost, time.Second, jobtrace.OutcomeCompensated, jobtrace.OutcomeCompensated, jobtrace.OutcomeFailed)
	run("report", "duplicate", jobtrace.OutcomeDuplicate, 0) // no duration: the job did not run
	run("", "", jobtrace.OutcomeDeadLettered, time.Second)   // rejected before a claim: no duration
	run("report", "acquired", jobtrace.OutcomeDeadLettered, 2*time.Second)

	lags := []jobtrace.PartitionLag{{Topic: "jobs", Partition: 0, Lag: 7}, {Topic: "jobs", Partition: 3, Lag: 0}}
	var lagMu sync.Mutex
	reg, err := f.tr.Metrics().ObserveCommitLag(func() []jobtrace.PartitionLag {
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
		"leasehold.limit.held{}":                                              0, // served from the start
	}
	// Claim and compensation outcomes that never happened read 0 (they exist
	// from the start; see TestMetricsAtStart).
	for _, o := range outcome.Claims() {
		want["leasehold.claims{outcome="+string(o)+"}"] += 0
	}
	for _, o := range outcome.CompensationSteps() {
		want["leasehold.compensations{outcome="+string(o)+"}"] += 0
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
		f.tr.Metrics().JobDone(context.Background(), "type-"+strconv.Itoa(i), outcome.Completed, time.Millisecond)
	}
	types := map[string]bool{}
	for k := range f.collect(t) {
		if i := strings.Index(k, "job_type="); i >= 0 {
			types[strings.SplitN(k[i+len("job_type="):], ",", 2)[0]] = true
		}
	}
	if len(types) != 257 || !types[jobtrace.OtherJobType] {
		t.Errorf("%d job_type values (other present: %v), want 256 + %q", len(types), types[jobtrace.OtherJobType], jobtrace.OtherJobType)
	}
}
