package leasehold

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"go.opentelemetry.io/otel/attribute"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/leasehold/leasehold/idempotency"
	"github.com/leasehold/leasehold/internal/testkit"
	"github.com/leasehold/leasehold/tracing"
)

// TestResetRunsFixedJob: a job that failed terminally is replayed from its
// cached failure, and its fixed payload is dead-lettered as a fingerprint
// mismatch; after Worker.Reset the fixed payload runs, under a fence above
// the failed attempt's. Inspect and Reset work before Start.
func TestResetRunsFixedJob(t *testing.T) {
	t.Parallel()
	h := setup(t, 1)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	var mu sync.Mutex
	fences := map[string]uint64{}
	handler := func(_ context.Context, j *Job) ([]byte, error) {
		mu.Lock()
		fences[string(j.Payload)] = j.Fence()
		mu.Unlock()
		if string(j.Payload) == "bad" {
			return nil, Permanent(errors.New("bad payload"))
		}
		return []byte("done:" + string(j.Payload)), nil
	}
	w := h.start(t, h.rdb, func(w *Worker) { must(t, w.Register("test.fix", handler)) })
	h.produce(t, []*kgo.Record{jobRecord(t, NewJob{Type: "test.fix", Key: "fix-1", Payload: []byte("bad")})})
	testkit.Eventually(t, 20*time.Second, "the job fails terminally", func() bool { return w.Stats().DeadLettered == 1 })
	h.produce(t, []*kgo.Record{jobRecord(t, NewJob{Type: "test.fix", Key: "fix-1", Payload: []byte("fixed")})})
	testkit.Eventually(t, 20*time.Second, "the fixed payload is dead-lettered", func() bool { return w.Stats().DeadLettered == 2 })
	if got := string(headerValue(h.kafka.ReadAll(t, h.dlq)[1].Headers, HeaderDLQReason)); got != ReasonMismatch {
		t.Fatalf("fixed payload dead-lettered as %q, want %q", got, ReasonMismatch)
	}

	// A second worker, never started, sees and resets the key.
	idle, err := New(h.rdb, h.opts()...)
	must(t, err)
	info, err := idle.Inspect(ctx, "fix-1")
	must(t, err)
	if info.State != idempotency.Failed || !strings.Contains(info.Failure, "bad payload") || info.Leased || info.Fence == 0 {
		t.Fatalf("Inspect before Start = %+v, want FAILED with the cached error, no lease", info)
	}
	r, err := idle.Reset(ctx, "fix-1", false)
	must(t, err)
	if r.State != idempotency.Failed || r.Fence != info.Fence || r.LeaseEnded {
		t.Fatalf("Reset = %+v, want FAILED at fence %d", r, info.Fence)
	}
	if info, err := idle.Inspect(ctx, "fix-1"); err != nil || info.State != idempotency.Absent {
		t.Fatalf("Inspect after Reset = %+v, %v; want ABSENT", info, err)
	}

	h.produce(t, []*kgo.Record{jobRecord(t, NewJob{Type: "test.fix", Key: "fix-1", Payload: []byte("fixed")})})
	testkit.Eventually(t, 20*time.Second, "the fixed payload runs", func() bool { return w.Stats().Succeeded == 1 })
	mu.Lock()
	bad, fixed := fences["bad"], fences["fixed"]
	mu.Unlock()
	if fixed <= bad {
		t.Fatalf("fence after reset %d, want above the failed attempt's %d", fixed, bad)
	}
	info, err = w.Inspect(ctx, "fix-1")
	must(t, err)
	if info.State != idempotency.Completed || string(info.Result) != "done:fixed" || info.Fence != fixed || info.Attempt != 1 {
		t.Fatalf("Inspect after the rerun = %+v, want COMPLETED with the new result, fence %d, attempt 1", info, fixed)
	}
}

// TestResetForcedEndsLease: a reset of a running job is refused; forced, it
// ends the lease: the handler's context is cancelled with ErrLeaseLost, its
// result is not committed, and Inspect showed the holder (owner digest, fence,
// time left) while it ran.
func TestResetForcedEndsLease(t *testing.T) {
	t.Parallel()
	h := setup(t, 1)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	started := make(chan uint64, 1)
	ended := make(chan error, 1)
	var runs sync.Map
	handler := func(jctx context.Context, j *Job) ([]byte, error) {
		started <- j.Fence()
		if _, again := runs.LoadOrStore(j.Key, true); again {
			return []byte("rerun"), nil
		}
		<-jctx.Done()
		ended <- context.Cause(jctx)
		return []byte("too late"), nil
	}
	w := h.start(t, h.rdb, func(w *Worker) {
		must(t, w.Register("test.long", handler, WithMaxAttempts(1)))
	})
	h.produce(t, []*kgo.Record{jobRecord(t, NewJob{Type: "test.long", Key: "long-1"})})
	var fence uint64
	select {
	case fence = <-started:
	case <-ctx.Done():
		t.Fatal("job did not start")
	}
	info, err := w.Inspect(ctx, "long-1")
	must(t, err)
	if info.State != idempotency.Processing || !info.Leased || info.LeaseFence != fence || len(info.Owner) != 8 ||
		info.Remaining <= 0 {
		t.Fatalf("Inspect of a running job = %+v, want PROCESSING, leased at fence %d, an owner digest, time left", info, fence)
	}
	if _, err := w.Reset(ctx, "long-1", false); !errors.Is(err, idempotency.ErrResetHeld) {
		t.Fatalf("Reset of a running job = %v, want ErrResetHeld", err)
	}
	r, err := w.Reset(ctx, "long-1", true)
	if err != nil || !r.LeaseEnded || r.Fence != fence {
		t.Fatalf("forced Reset = %+v, %v; want the lease at fence %d ended", r, err, fence)
	}
	select {
	case cause := <-ended:
		if !errors.Is(cause, ErrLeaseLost) {
			t.Fatalf("handler cancelled with %v, want ErrLeaseLost", cause)
		}
	case <-ctx.Done():
		t.Fatal("the handler kept running after a forced reset")
	}
	testkit.Eventually(t, 20*time.Second, "the lease loss is counted", func() bool { return w.Stats().LeasesLost == 1 })
	// The job runs again (the record was forgotten) under a higher fence.
	select {
	case again := <-started:
		if again <= fence {
			t.Fatalf("rerun fence %d, want above %d", again, fence)
		}
	case <-ctx.Done():
		t.Fatal("the job did not run again after the forced reset")
	}
}

// TestResetTraced: a reset is a `reset` span carrying the key, the force
// flag (false), the fence and its outcome.
func TestResetTraced(t *testing.T) {
	t.Parallel()
	h := setup(t, 1)
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	tr, err := tracing.New(tracing.WithTracerProvider(tp), tracing.WithMeterProvider(sdkmetric.NewMeterProvider()))
	must(t, err)
	w, err := New(h.rdb, h.opts(WithTracing(tr))...)
	must(t, err)
	ctx := context.Background()
	if _, err := w.Reset(ctx, "traced-1", false); err != nil {
		t.Fatal(err)
	}
	spans := rec.Ended()
	if len(spans) != 1 || spans[0].Name() != tracing.SpanReset {
		t.Fatalf("spans %v, want one %q span", spans, tracing.SpanReset)
	}
	attrs := map[attribute.Key]attribute.Value{}
	for _, a := range spans[0].Attributes() {
		attrs[a.Key] = a.Value
	}
	if attrs[tracing.AttrIdempotencyKey].AsString() == "" || attrs[tracing.AttrOutcome].AsString() != "reset" ||
		attrs[tracing.AttrForce].AsBool() {
		t.Fatalf("reset span attributes %v", attrs)
	}
}
