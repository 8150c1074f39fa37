package leasehold

import (
	"context"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/leasehold/leasehold/internal/testkit"
	"github.com/leasehold/leasehold/tracing"
)

// spanTracer returns a Tracer whose spans rec records, shut down at cleanup.
func spanTracer(t *testing.T, extra ...tracing.Opt) (*tracing.Tracer, *tracetest.SpanRecorder) {
	t.Helper()
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	t.Cleanup(func() { _ = tp.Shutdown(context.Background()) })
	tr, err := tracing.New(append([]tracing.Opt{tracing.WithTracerProvider(tp)}, extra...)...)
	must(t, err)
	return tr, rec
}

// jobSpans counts the `process <topic>` spans rec saw start and end, and
// the outcomes of the ended ones.
func jobSpans(rec *tracetest.SpanRecorder, topic string) (started, ended int, outcomes map[string]int) {
	for _, s := range rec.Started() {
		if s.Name() == "process "+topic {
			started++
		}
	}
	outcomes = map[string]int{}
	for _, s := range rec.Ended() {
		if s.Name() != "process "+topic {
			continue
		}
		ended++
		for _, a := range s.Attributes() {
			if a.Key == tracing.AttrOutcome {
				outcomes[a.Value.AsString()]++
			}
		}
	}
	return started, ended, outcomes
}

// TestRemovedPartitionEndsParkedSpans: a record parked because its key is
// held keeps its job span open; when its partition is revoked or lost the
// record is dropped and its span ends, as revoked.
func TestRemovedPartitionEndsParkedSpans(t *testing.T) {
	t.Parallel()
	for _, lost := range []bool{false, true} {
		name := map[bool]string{false: "revoked", true: "lost"}[lost]
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			w, b := setupDispatch(t, func(context.Context, *Job) ([]byte, error) {
				t.Error("the handler ran for a held key")
				return nil, nil
			})
			tr, rec := spanTracer(t)
			w.cfg.tracer = tr
			w.obs = w.newObservers()
			w.cfg.commit = func(context.Context, *kgo.Client) error { return nil }
			b.store.answer("k1", claim{Outcome: OutcomeHeld, Remaining: time.Hour}, nil)
			b.store.answer("k2", claim{Outcome: OutcomeHeld, Remaining: time.Hour}, nil)
			dispatchRecord(t, w, "k1", 0)
			dispatchRecord(t, w, "k2", 1)
			if started, ended, _ := jobSpans(rec, "jobs"); started != 2 || ended != 0 {
				t.Fatalf("held records: %d job spans started, %d ended; want 2 open", started, ended)
			}
			parts := map[string][]int32{"jobs": {0}}
			if lost {
				w.onLost(context.Background(), w.cl, parts)
			} else {
				w.onRevoked(context.Background(), w.cl, parts)
			}
			if n := w.sched.len(); n != 0 {
				t.Errorf("%d records still parked after their partition was %s", n, name)
			}
			started, ended, outcomes := jobSpans(rec, "jobs")
			if started != ended {
				t.Errorf("%d job spans started, %d ended", started, ended)
			}
			if outcomes["revoked"] != 2 {
				t.Errorf("ended spans' outcomes %v, want 2 revoked", outcomes)
			}
		})
	}
}

// TestShutdownEndsParkedSpans: a worker shutting down with a record parked
// for a key another worker holds ends its job span: in a consumer group
// (leaving the group revokes the partition) and in a share group (no
// partitions: the shutdown itself ends what the schedule still holds).
func TestShutdownEndsParkedSpans(t *testing.T) {
	t.Parallel()
	t.Run("consumer group", func(t *testing.T) {
		t.Parallel()
		shutdownWithParked(t, false)
	})
	t.Run("share group", func(t *testing.T) {
		t.Parallel()
		shutdownWithParked(t, true)
	})
}

func shutdownWithParked(t *testing.T, share bool) {
	h := setup(t, 1)
	_, holding, unblock := h.startHolder(t, "test.held")
	h.produce(t, []*kgo.Record{jobRecord(t, NewJob{Type: "test.held", Key: "held-1"})})
	<-holding

	tr, rec := spanTracer(t, tracing.WithConsumerGroup(h.group))
	opts := []Opt{WithTracing(tr)}
	if share {
		opts = h.shareOpts(opts...)
	}
	w := h.start(t, h.rdb, func(w *Worker) {
		must(t, w.Register("test.held", func(context.Context, *Job) ([]byte, error) {
			t.Error("the key ran on a second worker while held")
			return nil, nil
		}))
	}, opts...)
	testkit.Eventually(t, 30*time.Second, "the record parked for the held key", func() bool {
		s := w.Stats()
		return s.Claimed[OutcomeHeld] > 0 && s.Parked == 1
	})
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	must(t, w.Shutdown(ctx))
	unblock()
	started, ended, outcomes := jobSpans(rec, h.topic)
	if started == 0 || started != ended {
		t.Errorf("%d job spans started, %d ended after Shutdown", started, ended)
	}
	if outcomes["revoked"] != 1 {
		t.Errorf("ended spans' outcomes %v, want 1 revoked", outcomes)
	}
}
