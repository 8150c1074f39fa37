package leasehold

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/twmb/franz-go/pkg/kgo"
	"go.opentelemetry.io/otel/attribute"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"

	"github.com/leasehold/leasehold/internal/testkit"
	"github.com/leasehold/leasehold/tracing"
)

// commitLag collects leasehold.commit.lag from r: partition -> lag.
func commitLag(t *testing.T, r *sdkmetric.ManualReader, topic string) map[string]int64 {
	t.Helper()
	var rm metricdata.ResourceMetrics
	if err := r.Collect(context.Background(), &rm); err != nil {
		t.Fatal(err)
	}
	out := map[string]int64{}
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			if m.Name != tracing.MetricCommitLag {
				continue
			}
			g, ok := m.Data.(metricdata.Gauge[int64])
			if !ok {
				t.Fatalf("%s is a %T, want an int64 gauge", m.Name, m.Data)
			}
			for _, dp := range g.DataPoints {
				if v, _ := dp.Attributes.Value(attribute.Key(tracing.LabelTopic)); v.AsString() != topic {
					continue
				}
				p, _ := dp.Attributes.Value(attribute.Key(tracing.LabelPartition))
				out[p.AsString()] = dp.Value
			}
		}
	}
	return out
}

// TestCommitLagMetric checks leasehold.commit.lag against the broker: while
// the first of n records is stuck in its handler nothing is committed and the
// lag is n; once all are done and committed it falls to 0.
func TestCommitLagMetric(t *testing.T) {
	h := setup(t, 1)
	reader := sdkmetric.NewManualReader()
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
	t.Cleanup(func() { _ = mp.Shutdown(context.Background()) })
	tr, err := tracing.New(tracing.WithMeterProvider(mp), tracing.WithConsumerGroup(h.group))
	if err != nil {
		t.Fatal(err)
	}
	const n = 5
	recs := make([]*kgo.Record, n)
	for i := range recs {
		recs[i] = jobRecord(t, NewJob{Type: "test.op", Key: fmt.Sprintf("lag-%d", i)})
	}
	h.produce(t, recs)

	release := make(chan struct{})
	w := h.start(t, h.rdb, func(w *Worker) {
		must(t, w.Register("test.op", func(ctx context.Context, _ *Job) ([]byte, error) {
			select {
			case <-release:
				return nil, nil
			case <-ctx.Done():
				return nil, context.Cause(ctx)
			}
		}))
	}, WithTracing(tr), WithConcurrency(1))

	want := map[string]int64{"0": n}
	var got map[string]int64
	deadline := time.Now().Add(20 * time.Second)
	for got = commitLag(t, reader, h.topic); !cmp.Equal(got, want) && time.Now().Before(deadline); got = commitLag(t, reader, h.topic) {
		time.Sleep(20 * time.Millisecond)
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Fatalf("commit lag while the first job runs (-want +got):\n%s", diff)
	}

	close(release)
	testkit.Eventually(t, 20*time.Second, "all jobs", func() bool { return w.Stats().Succeeded == n })
	h.waitCommitted(t, 20*time.Second)
	want = map[string]int64{"0": 0}
	deadline = time.Now().Add(20 * time.Second)
	for got = commitLag(t, reader, h.topic); !cmp.Equal(got, want) && time.Now().Before(deadline); got = commitLag(t, reader, h.topic) {
		time.Sleep(20 * time.Millisecond)
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("commit lag once everything is committed (-want +got):\n%s", diff)
	}

	// A stopped worker reports no partitions.
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	must(t, w.Shutdown(ctx))
	if got := commitLag(t, reader, h.topic); len(got) != 0 {
		t.Errorf("commit lag after shutdown: %v, want none", got)
	}
}
