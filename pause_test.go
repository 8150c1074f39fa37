package leasehold

import (
	"context"
	"fmt"
	"log/slog"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/leasehold/leasehold/inspect"
	"github.com/leasehold/leasehold/internal/testkit"
)

// TestPauseHoldsAndResumeDrains: with test.paused paused, a worker holds
// the 20 records of that type it polls (none runs, they stay in flight and
// the committed offset does not pass them) while a record of another type
// behind them runs; after the resume each held record runs once and the
// offsets reach the end.
func TestPauseHoldsAndResumeDrains(t *testing.T) {
	t.Parallel()
	const n = 20
	h := setup(t, 1)
	runs := newEffects()
	handler := func(_ context.Context, j *Job) ([]byte, error) {
		runs.add(j.Key)
		return []byte("ok"), nil
	}
	sink := &testkit.LogSink{}
	w := h.start(t, h.rdb, func(w *Worker) {
		must(t, w.Register("test.paused", handler))
		must(t, w.Register("test.other", handler))
	}, WithLogger(slog.New(sink)))
	in := w.Inspector()
	t.Cleanup(func() { _ = in.Close(context.Background()) })
	ctx := t.Context()
	must(t, in.Pause(ctx, "test.paused"))
	testkit.Eventually(t, 10*time.Second, "the worker reads the pause", func() bool { return len(w.PausedTypes()) == 1 })
	testkit.Eventually(t, 10*time.Second, "the worker logs the pause", func() bool { return sink.Has(logPaused) })

	recs := make([]*kgo.Record, 0, n+1)
	for i := range n {
		recs = append(recs, jobRecord(t, NewJob{Type: "test.paused", Key: fmt.Sprintf("paused-%d", i)}))
	}
	recs = append(recs, jobRecord(t, NewJob{Type: "test.other", Key: "other"}))
	h.produce(t, recs)
	testkit.Eventually(t, 30*time.Second, "the other type runs", func() bool { return runs.count("other") == 1 })
	// The other record's handler returns before its end is settled: wait
	// until only the held records are in flight.
	testkit.Eventually(t, 30*time.Second, "the paused records held, the other settled", func() bool {
		s := w.Stats()
		return s.Parked == n && s.InFlight == n
	})
	if got := len(runs.snapshot()); got != 1 {
		t.Fatalf("%d keys ran while their type was paused", got-1)
	}
	if s := w.Stats(); s.HeldBytes == 0 {
		t.Fatalf("held records: held bytes %d (want them counted)", s.HeldBytes)
	}
	if c := h.kafka.Committed(t, h.group, h.topic)[0]; c > 0 {
		t.Fatalf("committed offset %d passed the held records (first at 0)", c)
	}

	was, err := in.Resume(ctx, "test.paused")
	must(t, err)
	if !was {
		t.Fatal("Resume: the type was not paused")
	}
	testkit.Eventually(t, 30*time.Second, "the held records run", func() bool { return len(runs.snapshot()) == n+1 })
	h.waitCommitted(t, 30*time.Second)
	for k, c := range runs.snapshot() {
		if c != 1 {
			t.Errorf("%s ran %d times, want 1", k, c)
		}
	}
	if len(w.PausedTypes()) != 0 {
		t.Errorf("paused types after the resume: %v", w.PausedTypes())
	}
	testkit.Eventually(t, 10*time.Second, "the worker logs the resume", func() bool { return sink.Has(logResumed) })
	// Logged once a change, not once a renew round.
	if n, m := sink.Count(logPaused), sink.Count(logResumed); n != 1 || m != 1 {
		t.Errorf("pause logged %d times, resume %d times; want once each", n, m)
	}
}

// TestPauseHoldsFromStart: a type paused before a worker starts is held from
// its first batch, not only from its first renew round. With a lease TTL of
// 30 s (a renew interval of 10 s) a worker that had not read the pause yet
// would claim and run the paused record, which sits before the other one.
func TestPauseHoldsFromStart(t *testing.T) {
	t.Parallel()
	h := setup(t, 1)
	in := inspect.New(h.rdb, inspect.WithPrefix(h.prefix))
	t.Cleanup(func() { _ = in.Close(context.Background()) })
	ctx := t.Context()
	must(t, in.Pause(ctx, "test.paused"))
	h.produce(t, []*kgo.Record{
		jobRecord(t, NewJob{Type: "test.paused", Key: "paused-0"}),
		jobRecord(t, NewJob{Type: "test.other", Key: "other"}),
	})
	runs := newEffects()
	handler := func(_ context.Context, j *Job) ([]byte, error) {
		runs.add(j.Key)
		return []byte("ok"), nil
	}
	w := h.start(t, h.rdb, func(w *Worker) {
		must(t, w.Register("test.paused", handler))
		must(t, w.Register("test.other", handler))
	}, WithLeaseTTL(30*time.Second))
	testkit.Eventually(t, 30*time.Second, "the other type runs and the paused record is held", func() bool {
		return runs.count("other") == 1 && w.Stats().Parked == 1 || runs.count("paused-0") > 0
	})
	if n := runs.count("paused-0"); n > 0 {
		t.Fatalf("the paused record ran %d times before the worker's first renew round", n)
	}
	if got := w.PausedTypes(); len(got) != 1 || got[0] != "test.paused" {
		t.Fatalf("PausedTypes right after Start: %v, want [test.paused]", got)
	}
}
