package leasehold

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/leasehold/leasehold/compensation"
	"github.com/leasehold/leasehold/internal/testkit"
)

type typedProgress struct {
	Step int `json:"step"`
}

type typedRefund struct {
	Key   string `json:"key"`
	Fence uint64 `json:"fence"`
}

// TestTypedStepAndHeartbeat runs StepWith, RecordHeartbeat and
// LastHeartbeatAs through a real worker (Redis and Kafka): the first attempt
// has a handle of another registry refused before its effect, charges as a
// typed step, records a typed checkpoint and fails; the worker refunds the
// charge with the typed arguments; the second attempt reads the checkpoint
// back as a value and completes, its charge standing.
func TestTypedStepAndHeartbeat(t *testing.T) {
	h := setup(t, 1)
	var (
		mu       sync.Mutex
		refunded []typedRefund
		resumed  []string
	)
	reg := compensation.NewRegistry()
	refund := compensation.MustRegister(reg, "typed.refund", func(_ context.Context, a typedRefund) error {
		mu.Lock()
		defer mu.Unlock()
		refunded = append(refunded, a)
		return nil
	})
	foreign := compensation.MustRegister(compensation.NewRegistry(), "typed.refund",
		func(context.Context, typedRefund) error { return nil })
	fences := make(chan uint64, 2)
	handler := func(ctx context.Context, j *Job) ([]byte, error) {
		p, ok, err := LastHeartbeatAs[typedProgress](j)
		mu.Lock()
		resumed = append(resumed, fmt.Sprintf("attempt %d: %v %v %v", j.Attempt, p, ok, err))
		mu.Unlock()
		if j.Attempt == 1 {
			ran := false
			err := StepWith(ctx, j, "foreign", func(context.Context) error { ran = true; return nil }, foreign, typedRefund{})
			if !errors.Is(err, compensation.ErrUnknownHandler) || ran {
				t.Errorf("a handle of another registry: %v (effect ran %v), want ErrUnknownHandler first", err, ran)
			}
		}
		fences <- j.Fence()
		if err := StepWith(ctx, j, "charge", func(context.Context) error { return nil }, refund,
			typedRefund{Key: j.Key, Fence: j.Fence()}); err != nil {
			return nil, err
		}
		if err := RecordHeartbeat(ctx, j, typedProgress{Step: p.Step + 1}); err != nil {
			return nil, err
		}
		if j.Attempt == 1 {
			return nil, errors.New("downstream hiccup")
		}
		return []byte("ok"), nil
	}
	w := h.start(t, h.rdb, func(w *Worker) { must(t, w.Register("test.typed", handler)) }, WithCompensation(reg))
	h.produce(t, []*kgo.Record{jobRecord(t, NewJob{Type: "test.typed", Key: "typed-1"})})

	testkit.Eventually(t, 30*time.Second, "the job completed", func() bool { return w.Stats().Succeeded == 1 })
	first := <-fences
	mu.Lock()
	defer mu.Unlock()
	want := []string{"attempt 1: {0} false <nil>", "attempt 2: {1} true <nil>"}
	if fmt.Sprint(resumed) != fmt.Sprint(want) {
		t.Errorf("checkpoints read: %q, want %q", resumed, want)
	}
	if len(refunded) != 1 || refunded[0] != (typedRefund{Key: "typed-1", Fence: first}) {
		t.Errorf("refunds %+v, want one of attempt 1's charge (fence %d)", refunded, first)
	}
}
