package leasehold

import (
	"context"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"

	"github.com/leasehold/leasehold/internal/testkit"
	"github.com/leasehold/leasehold/tracing"
)

// TestDeadLetterNewCluster: poison records dead-lettered on one cluster
// leave markers in Redis; a second cluster with the same topic names and a
// worker with the same Redis prefix (a replaced Kafka, offsets from 0 again)
// dead-letters its own poison records all the same: every one reaches the
// new dead-letter topic, and the worker's counters and the
// leasehold.dead_lettered metric count exactly the copies the broker
// acknowledged.
func TestDeadLetterNewCluster(t *testing.T) {
	t.Parallel()
	a := setup(t, 1)
	deadLetterPoison(t, a, "a", 3)

	// The second cluster: another kfake, or on a real broker an Apache
	// Kafka broker of this test's own.
	var kb *testkit.Kafka
	if testkit.IsFake() {
		kb = testkit.StartKafka(t)
	} else {
		kb = testkit.StartApacheKafka(t)
	}
	kb.CreateTopic(t, a.topic, 1)
	kb.CreateTopic(t, a.dlq, 1)
	b := &harness{kafka: kb, rdb: a.rdb, prefix: a.prefix, topic: a.topic, dlq: a.dlq, group: a.group}
	deadLetterPoison(t, b, "b", 12)
}

// TestDeadLetterRecreatedTopic: the consumed topic is deleted and created
// again under the same name (offsets from 0 again, a new topic ID), the
// Redis prefix and the dead-letter topic stay: the new topic's poison records
// are dead-lettered, each once, and counted as acknowledged.
func TestDeadLetterRecreatedTopic(t *testing.T) {
	t.Parallel()
	h := setup(t, 1)
	deadLetterPoison(t, h, "a", 3)

	h.kafka.RecreateTopic(t, h.topic, 1)
	h2 := *h
	h2.group = h.group + "-2"
	deadLetterPoison(t, &h2, "b", 12)
}

// deadLetterPoison starts a worker on h that knows one job type, produces n
// records of another type (keys tag-0, tag-1, ...), waits until their offsets
// are committed, checks that each has exactly one copy in the dead-letter
// topic and that the worker's Stats and leasehold.dead_lettered count n, and
// shuts the worker down.
func deadLetterPoison(t *testing.T, h *harness, tag string, n int) {
	t.Helper()
	reader := sdkmetric.NewManualReader()
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
	t.Cleanup(func() { _ = mp.Shutdown(context.Background()) })
	tr, err := tracing.New(tracing.WithMeterProvider(mp), tracing.WithConsumerGroup(h.group))
	must(t, err)
	w := h.start(t, h.rdb, func(w *Worker) {
		must(t, w.Register("test.op", func(context.Context, *Job) ([]byte, error) { return nil, nil }))
	}, WithTracing(tr))
	recs := make([]*kgo.Record, n)
	for i := range recs {
		recs[i] = jobRecord(t, NewJob{Type: "nope", Key: tag + "-" + strconv.Itoa(i)})
	}
	h.produce(t, recs)
	h.waitCommitted(t, 60*time.Second)

	copies := map[string]int{}
	for _, r := range h.kafka.ReadAll(t, h.dlq) {
		if k := keyOf(r); strings.HasPrefix(k, tag+"-") {
			copies[k]++
			if got := string(headerValue(r.Headers, HeaderDLQReason)); got != ReasonUnknownType {
				t.Errorf("%s: copy of %s has reason %q, want %q", tag, k, got, ReasonUnknownType)
			}
		}
	}
	acked := 0
	for _, r := range recs {
		acked += copies[keyOf(r)]
		if copies[keyOf(r)] != 1 {
			t.Errorf("%s: %d copies of %s in the dead-letter topic, want 1", tag, copies[keyOf(r)], keyOf(r))
		}
	}
	// The counters count the copies the broker acknowledged, whatever the
	// number of copies is.
	if got := w.Stats().DeadLettered; got != int64(acked) {
		t.Errorf("%s: Stats.DeadLettered %d, want %d (the copies in the topic)", tag, got, acked)
	}
	if got := deadLetteredMetric(t, reader); got != int64(acked) {
		t.Errorf("%s: leasehold.dead_lettered %d, want %d (the copies in the topic)", tag, got, acked)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	must(t, w.Shutdown(ctx))
}

// deadLetteredMetric sums leasehold.dead_lettered over its reasons.
func deadLetteredMetric(t *testing.T, reader *sdkmetric.ManualReader) int64 {
	t.Helper()
	var rm metricdata.ResourceMetrics
	must(t, reader.Collect(context.Background(), &rm))
	var n int64
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			if sum, ok := m.Data.(metricdata.Sum[int64]); ok && m.Name == tracing.MetricDeadLettered {
				for _, dp := range sum.DataPoints {
					n += dp.Value
				}
			}
		}
	}
	return n
}
