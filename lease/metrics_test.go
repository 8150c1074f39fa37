package lease_test

import (
	"context"
	"testing"
	"time"

	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"

	"github.com/leasehold/leasehold/lease"
)

func TestMetrics(t *testing.T) {
	t.Parallel()
	reader := sdkmetric.NewManualReader()
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
	defer mp.Shutdown(context.Background())
	const interval = 100 * time.Millisecond
	m, c, _ := setup(t, lease.WithTTL(time.Second), lease.WithRenewInterval(interval), lease.WithMeterProvider(mp))
	ctx := context.Background()

	a, b := acquire(t, m, "a"), acquire(t, m, "b")
	if _, err := m.Acquire(ctx, "a"); err == nil {
		t.Fatal("acquired a held lease")
	}
	c.HSet(ctx, m.Key("b"), "tok", "thief")
	waitDone(t, b, time.Second)
	time.Sleep(2 * interval)

	var rm metricdata.ResourceMetrics
	if err := reader.Collect(ctx, &rm); err != nil {
		t.Fatal(err)
	}
	got := map[string]int64{}
	for _, sm := range rm.ScopeMetrics {
		for _, mt := range sm.Metrics {
			switch d := mt.Data.(type) {
			case metricdata.Sum[int64]:
				for _, p := range d.DataPoints {
					k := mt.Name
					for _, kv := range p.Attributes.ToSlice() {
						k += " " + string(kv.Key) + "=" + kv.Value.AsString()
					}
					got[k] += p.Value
				}
			case metricdata.Histogram[float64]:
				for _, p := range d.DataPoints {
					got[mt.Name] += int64(p.Count)
				}
			}
		}
	}
	for k, want := range map[string]int64{
		"leasehold.lease.held":                     1,
		"leasehold.lease.lost cause=stolen":        1,
		"leasehold.lease.acquire outcome=acquired": 2,
		"leasehold.lease.acquire outcome=held":     1,
	} {
		if got[k] != want {
			t.Errorf("%s = %d, want %d (all: %v)", k, got[k], want, got)
		}
	}
	if got["leasehold.lease.renew.duration"] == 0 {
		t.Errorf("no renew duration recorded: %v", got)
	}
	if err := a.Release(ctx); err != nil {
		t.Fatal(err)
	}
}
