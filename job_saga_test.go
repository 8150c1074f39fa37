package leasehold

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/leasehold/leasehold/compensation"
	"github.com/leasehold/leasehold/fence"
	"github.com/leasehold/leasehold/internal/testkit"
)

// ledger is a toy downstream system: charges and refunds per job key.
type ledger struct {
	mu      sync.Mutex
	charged map[string]int
	refunds map[string]int
}

func (l *ledger) charge(k string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.charged[k]++
}

func (l *ledger) refund(k string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.refunds[k]++
}

func (l *ledger) net(k string) (int, int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.charged[k], l.refunds[k]
}

// refundLedger returns an empty ledger and a registry whose "test.refund"
// handler records refunds in it.
func refundLedger() (*ledger, *compensation.Registry) {
	led := &ledger{charged: map[string]int{}, refunds: map[string]int{}}
	reg := compensation.NewRegistry()
	compensation.MustRegister(reg, "test.refund", func(_ context.Context, a refundArgs) error {
		led.refund(a.Key)
		return nil
	})
	return led, reg
}

type refundArgs struct {
	Key string `json:"key"`
}

// TestSagaCompensatedOnLostLeaseAndFailure: a job whose lease is expired
// while it runs has its step compensated once, is taken over and completes;
// a job that fails once after its step is compensated, retried and completes.
// Each ends with exactly one charge that stands.
func TestSagaCompensatedOnLostLeaseAndFailure(t *testing.T) { sagaLostLeaseAndFailure(t, false) }

// sagaLostLeaseAndFailure is TestSagaCompensatedOnLostLeaseAndFailure in
// consumer-group mode, or in share-group mode (share.go) with share.
func sagaLostLeaseAndFailure(t *testing.T, share bool) {
	h := setup(t, 2)
	var mode []Opt
	if share {
		mode = h.shareOpts()
	}
	led, reg := refundLedger()
	var failedOnce atomic.Bool
	var lostHook atomic.Int32
	running := make(chan *Job, 4)
	handler := func(ctx context.Context, j *Job) ([]byte, error) {
		err := j.Step(ctx, "charge", func(context.Context) error { led.charge(j.Key); return nil },
			"test.refund", refundArgs{Key: j.Key})
		if err != nil {
			return nil, err
		}
		if j.Key == "saga-fail" && failedOnce.CompareAndSwap(false, true) {
			return nil, errors.New("downstream hiccup")
		}
		if j.Key == "saga-lost" && !j.Takeover {
			running <- j
			<-ctx.Done() // wait for the lease to be taken away
			return nil, context.Cause(ctx)
		}
		return []byte("ok"), nil
	}
	w := h.start(t, h.rdb, func(w *Worker) { must(t, w.Register("test.saga", handler)) },
		append(mode, WithCompensation(reg), WithLeaseTTL(time.Second),
			WithHooks(Hooks{OnLeaseLost: func(context.Context, *Job, error) { lostHook.Add(1) }}))...)
	h.produce(t, []*kgo.Record{
		jobRecord(t, NewJob{Type: "test.saga", Key: "saga-lost"}),
		jobRecord(t, NewJob{Type: "test.saga", Key: "saga-fail"}),
	})

	j := <-running
	rs := w.store.(*redisStore)
	leaseKey := rs.m.Key(rs.s.LeaseName(j.Key))
	// Deleted, not given a 1 ms TTL, which a renewal within that millisecond
	// would undo.
	if err := h.rdb.Del(context.Background(), leaseKey).Err(); err != nil {
		t.Fatal(err)
	}
	testkit.Eventually(t, 30*time.Second, "both jobs completed", func() bool { return w.Stats().Succeeded == 2 })
	if !share {
		h.waitCommitted(t, 20*time.Second)
	}

	for _, k := range []string{"saga-lost", "saga-fail"} {
		charged, refunded := led.net(k)
		if charged != 2 || refunded != 1 {
			t.Errorf("%s: %d charges, %d refunds; want 2 and 1 (one attempt undone, one standing)", k, charged, refunded)
		}
	}
	if lostHook.Load() != 1 {
		t.Errorf("lost-lease hooks: %d, want 1", lostHook.Load())
	}
	if s := w.Stats(); s.Claimed[OutcomeTakeover] != 1 {
		t.Errorf("takeovers: %d, want 1", s.Claimed[OutcomeTakeover])
	}
}

// TestStaleFenceSettlesAsLostLease: a handler whose downstream write was
// refused by the fence guard returns the guard's error as it is; the worker
// settles the attempt as a lost lease (its saga step compensated, OnLeaseLost
// called, not counted as a retryable failure) and the next attempt completes.
func TestStaleFenceSettlesAsLostLease(t *testing.T) {
	h := setup(t, 1)
	led, reg := refundLedger()
	var refusedOnce atomic.Bool
	var lostHook, retryHook atomic.Int32
	handler := func(ctx context.Context, j *Job) ([]byte, error) {
		err := j.Step(ctx, "charge", func(context.Context) error { led.charge(j.Key); return nil },
			"test.refund", refundArgs{Key: j.Key})
		if err != nil {
			return nil, err
		}
		if refusedOnce.CompareAndSwap(false, true) {
			// As fence.Apply answers when a newer owner took the resource.
			return nil, fmt.Errorf("write balance: %w", &fence.StaleError{Resource: "acct-1", Fence: j.Fence(), Current: j.Fence() + 1})
		}
		return []byte("ok"), nil
	}
	w := h.start(t, h.rdb, func(w *Worker) { must(t, w.Register("test.saga", handler)) },
		WithCompensation(reg), WithLeaseTTL(time.Second),
		WithHooks(Hooks{
			OnLeaseLost: func(context.Context, *Job, error) { lostHook.Add(1) },
			OnRetry:     func(context.Context, ClaimInfo, time.Duration, error) { retryHook.Add(1) },
		}))
	h.produce(t, []*kgo.Record{jobRecord(t, NewJob{Type: "test.saga", Key: "stale-fence"})})

	testkit.Eventually(t, 30*time.Second, "the job completed", func() bool { return w.Stats().Succeeded == 1 })
	h.waitCommitted(t, 20*time.Second)
	if charged, refunded := led.net("stale-fence"); charged != 2 || refunded != 1 {
		t.Errorf("%d charges, %d refunds; want 2 and 1 (the refused attempt undone)", charged, refunded)
	}
	if lostHook.Load() != 1 {
		t.Errorf("lost-lease hooks: %d, want 1", lostHook.Load())
	}
	if s := w.Stats(); s.Retried != 0 {
		t.Errorf("retryable failures: %d, want 0: a stale fence is a lost lease, not a failure", s.Retried)
	}
}

// TestStepWithoutCompensation: Step refuses to run without WithCompensation.
func TestStepWithoutCompensation(t *testing.T) {
	t.Parallel()
	j := &Job{Key: "k"}
	ran := false
	err := j.Step(context.Background(), "s", func(context.Context) error { ran = true; return nil }, "h", nil)
	if !errors.Is(err, ErrNoCompensation) || ran {
		t.Fatalf("Step without compensation: err %v, ran %v", err, ran)
	}
}
