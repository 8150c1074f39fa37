package leasehold

import (
	"context"
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/leasehold/leasehold/internal/testkit"
)

// TestTypedUndecodable: a payload that does not decode into a Typed
// handler's input is dead-lettered with reason undecodable (as the docs list
// the reasons), the decoding error in its error header, at once and without
// a retry; the function never runs and the partition's offsets move past it.
func TestTypedUndecodable(t *testing.T) {
	t.Parallel()
	h := setup(t, 1)
	type order struct{ Amount int }
	var runs atomic.Int32
	fn := func(_ context.Context, _ *Job, o order) (int, error) {
		runs.Add(1)
		return o.Amount, nil
	}
	w := h.start(t, h.rdb, func(w *Worker) { must(t, w.Register("test.order", Typed(fn))) })
	h.produce(t, []*kgo.Record{
		jobRecord(t, NewJob{Type: "test.order", Key: "bad-1", Payload: []byte(`{"Amount": "ten"}`)}),
		jobRecord(t, NewJob{Type: "test.order", Key: "good-1", Payload: []byte(`{"Amount": 10}`)}),
	})
	testkit.Eventually(t, 20*time.Second, "one job dead-lettered, one run", func() bool {
		s := w.Stats()
		return s.DeadLettered == 1 && s.Succeeded == 1
	})
	h.waitCommitted(t, 20*time.Second)
	dl := h.kafka.ReadAll(t, h.dlq)
	if len(dl) != 1 {
		t.Fatalf("%d dead-letter records, want 1", len(dl))
	}
	reason, msg := string(headerValue(dl[0].Headers, HeaderDLQReason)), string(headerValue(dl[0].Headers, HeaderDLQError))
	if keyOf(dl[0]) != "bad-1" || reason != ReasonUndecodable || !strings.Contains(msg, "Amount") {
		t.Errorf("dead letter of %q, reason %q, error %q; want bad-1, %q, naming the field", keyOf(dl[0]), reason, msg, ReasonUndecodable)
	}
	if n := runs.Load(); n != 1 {
		t.Errorf("the function ran %d times, want 1 (the good payload only)", n)
	}
	if s := w.Stats(); s.Retried != 0 {
		t.Errorf("%d retries, want none", s.Retried)
	}
}

// TestTypedUndecodableError: Typed's decoding error is ErrUndecodable and
// wraps the JSON error.
func TestTypedUndecodableError(t *testing.T) {
	t.Parallel()
	h := Typed(func(context.Context, *Job, struct{ N int }) (int, error) { return 0, nil })
	_, err := h(context.Background(), &Job{Type: "t", Payload: []byte("{")})
	if !errors.Is(err, ErrUndecodable) {
		t.Fatalf("err %v: want ErrUndecodable", err)
	}
}
