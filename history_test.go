package leasehold

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/leasehold/leasehold/compensation"
	"github.com/leasehold/leasehold/idempotency"
	"github.com/leasehold/leasehold/internal/jobtrace"
	"github.com/leasehold/leasehold/internal/testkit"
	"github.com/leasehold/leasehold/lease"
	"github.com/leasehold/leasehold/outcome"
	"github.com/leasehold/leasehold/tracing"
)

// TestHistoryLostLeaseTakeoverCompleted: a key whose first attempt loses
// its lease (expired while it runs) and is taken over reads back, in order:
// the first attempt ended lease lost with its saga step compensated, then
// the takeover, completed; each with its fence, owner digest, worker and
// times. The Inspector shows the same history.
func TestHistoryLostLeaseTakeoverCompleted(t *testing.T) {
	h := setup(t, 1)
	reg := compensation.NewRegistry()
	compensation.MustRegister(reg, "test.refund", func(context.Context, refundArgs) error { return nil })
	running := make(chan *Job, 1)
	handler := func(ctx context.Context, j *Job) ([]byte, error) {
		if err := j.Step(ctx, "charge", func(context.Context) error { return nil }, "test.refund", refundArgs{Key: j.Key}); err != nil {
			return nil, err
		}
		if !j.Takeover {
			running <- j
			<-ctx.Done() // wait for the lease to be taken away
			return nil, context.Cause(ctx)
		}
		return []byte("ok"), nil
	}
	w := h.start(t, h.rdb, func(w *Worker) { must(t, w.Register("test.saga", handler)) },
		WithCompensation(reg), WithLeaseTTL(time.Second))
	h.produce(t, []*kgo.Record{jobRecord(t, NewJob{Type: "test.saga", Key: "hist-1"})})

	j := <-running
	rs := w.store.(*redisStore)
	must(t, h.rdb.Del(t.Context(), rs.m.Key(rs.s.LeaseName(j.Key))).Err()) // not a 1 ms TTL, which a renewal would undo
	testkit.Eventually(t, 30*time.Second, "the job completed", func() bool { return w.Stats().Succeeded == 1 })

	var hs []idempotency.Attempt
	testkit.Eventually(t, 10*time.Second, "both attempts ended in the history", func() bool {
		var err error
		hs, err = rs.s.History(t.Context(), "hist-1")
		must(t, err)
		return len(hs) == 2 && hs[0].End != "" && hs[1].End != "" && len(hs[0].Compensations) > 0
	})
	a, b := hs[0], hs[1]
	if a.Attempt != 1 || a.End != idempotency.EndLeaseLost || a.Fence == 0 || a.Owner == "" || a.Worker == "" ||
		a.Started.IsZero() || a.Ended.Before(a.Started) || a.Compensations[0].Step != "charge" ||
		a.Compensations[0].Outcome != string(compensation.OutcomeCompensated) {
		t.Fatalf("first attempt = %+v", a)
	}
	if b.Fence <= a.Fence || b.End != idempotency.EndCompleted || b.Owner == a.Owner || b.Started.Before(a.Started) {
		t.Fatalf("takeover = %+v (first %+v)", b, a)
	}
	in := w.Inspector()
	defer func() { _ = in.Close(context.Background()) }()
	ki, err := in.Key(t.Context(), "hist-1")
	must(t, err)
	if len(ki.History) != 2 || ki.History[1].Fence != b.Fence {
		t.Fatalf("Inspector history = %+v", ki.History)
	}
}

// TestSweepCompensationJoinsLostAttemptTrace: the recovery sweep compensates
// the saga of an attempt whose owner vanished (its lease expired, nothing
// undone); the `compensate` span belongs to that attempt's trace (a child of
// its span, read back from the key's history), links to it, and carries the
// key attribute hashed as the job spans carry it. The step's outcome joins
// the attempt's history.
func TestSweepCompensationJoinsLostAttemptTrace(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	rdb, prefix := testkit.SharedRedis(t)
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	t.Cleanup(func() { _ = tp.Shutdown(context.Background()) })
	tr, err := tracing.New(tracing.WithTracerProvider(tp))
	must(t, err)
	m, err := lease.NewManager(rdb, lease.WithPrefix(prefix), lease.WithTTL(time.Second))
	must(t, err)
	must(t, m.Start(ctx))
	t.Cleanup(func() { _ = m.Shutdown(context.Background()) })
	s, err := idempotency.New(ctx, rdb, m, idempotency.WithPrefix(prefix))
	must(t, err)
	reg := compensation.NewRegistry()
	compensation.MustRegister(reg, "test.refund", func(context.Context, refundArgs) error { return nil })
	r, err := compensation.NewRunner(rdb, m, reg, compensation.WithPrefix(prefix),
		compensation.WithObserver(compensationObserver(jobtrace.Of(tr), s, slog.New(slog.NewTextHandler(io.Discard, nil)))))
	must(t, err)
	t.Cleanup(func() { _ = r.Shutdown(context.Background()) })

	// The attempt: its span, its history entry, its journaled step.
	f, _ := idempotency.PayloadFingerprint([]byte("p"))
	c, err := s.Claim(ctx, "sweep-1", f)
	must(t, err)
	_, job := tp.Tracer("test").Start(ctx, "job test.saga")
	job.End()
	sc := job.SpanContext()
	must(t, s.HistoryStart(ctx, "sweep-1", idempotency.Attempt{Attempt: 1, Fence: c.Fence,
		TraceID: sc.TraceID().String(), SpanID: sc.SpanID().String()}, 0))
	must(t, r.Journal(c.Lease).Step(ctx, "charge", func(context.Context) error { return nil }, "test.refund", refundArgs{Key: "sweep-1"}))
	// Its owner vanishes: the lease expires, nothing is undone.
	must(t, rdb.Del(ctx, m.Key(c.Lease.Name())).Err()) // not a 1 ms TTL, which a renewal would undo
	<-c.Lease.Done()

	testkit.Eventually(t, 10*time.Second, "the sweep compensated the step", func() bool {
		_, err := r.Sweep(ctx)
		must(t, err)
		for _, sp := range rec.Ended() {
			if sp.Name() == tracing.SpanCompensation+" charge" {
				return true
			}
		}
		return false
	})
	for _, sp := range rec.Ended() {
		if sp.Name() != tracing.SpanCompensation+" charge" {
			continue
		}
		if sp.SpanContext().TraceID() != sc.TraceID() || sp.Parent().SpanID() != sc.SpanID() {
			t.Errorf("compensate span in trace %s under %s, want trace %s under the attempt's span %s",
				sp.SpanContext().TraceID(), sp.Parent().SpanID(), sc.TraceID(), sc.SpanID())
		}
		if len(sp.Links()) != 1 || sp.Links()[0].SpanContext.SpanID() != sc.SpanID() {
			t.Errorf("compensate span links %+v, want the attempt's span", sp.Links())
		}
		var key string
		for _, a := range sp.Attributes() {
			if string(a.Key) == tracing.AttrIdempotencyKey {
				key = a.Value.AsString()
			}
		}
		if key == "" || key == "sweep-1" {
			t.Errorf("compensate span key attribute %q, want the hashed key", key)
		}
	}
	hs, err := s.History(ctx, "sweep-1")
	must(t, err)
	if len(hs) != 1 || len(hs[0].Compensations) == 0 || hs[0].Compensations[0].Outcome != string(compensation.OutcomeCompensated) {
		t.Fatalf("history = %+v, want the sweep's compensation", hs)
	}
}

// TestAttemptOutcomeNames: how an attempt's end is named in its span, the
// job duration metric and its history.
func TestAttemptOutcomeNames(t *testing.T) {
	t.Parallel()
	refused := &LeaseLostError{Key: "k", Fence: 1, Err: fmt.Errorf("commit: %w", idempotency.ErrRefused)}
	for _, c := range []struct {
		e        attemptEnd
		stopping bool
		want     outcome.Name
	}{
		{attemptEnd{kind: endCompleted}, false, outcome.Completed},
		{attemptEnd{kind: endDuplicate}, false, outcome.Duplicate},
		{attemptEnd{kind: endRetry, err: context.Canceled}, false, outcome.Retry},
		{attemptEnd{kind: endRetry, err: context.Canceled}, true, outcome.Cancelled},
		{attemptEnd{kind: endRetry, err: errors.New("flaky")}, true, outcome.Retry},
		{attemptEnd{kind: endFailed}, false, outcome.Failed},
		{attemptEnd{kind: endLeaseLost, err: &LeaseLostError{Key: "k", Fence: 1, Err: lease.ErrExpired}}, false, outcome.LeaseLost},
		{attemptEnd{kind: endLeaseLost, err: refused}, false, outcome.CommitRefused},
		{attemptEnd{kind: endLeaseLost, err: ErrShutdown}, true, outcome.Cancelled},
		{attemptEnd{kind: endUnrecorded}, false, outcome.Unrecorded},
		{attemptEnd{kind: endRevoked}, false, outcome.Revoked},
		{attemptEnd{kind: endDeadLettered}, false, outcome.DeadLettered},
	} {
		got := c.e.outcome(c.stopping)
		if got != c.want {
			t.Errorf("outcome(%v, %v, stopping %v) = %q, want %q", c.e.kind, c.e.err, c.stopping, got, c.want)
		}
		if !outcome.Known(string(got)) {
			t.Errorf("outcome %q is not in package outcome's set", got)
		}
	}
	// Every kind has a name in the set (a new kind without one fails here).
	for k := endCompleted; k <= endDeadLettered; k++ {
		if !outcome.Known(k.String()) {
			t.Errorf("end kind %d is named %q, not in package outcome's set", k, k)
		}
	}
}
