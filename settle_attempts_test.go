package leasehold

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/leasehold/leasehold/internal/testkit"
	"github.com/leasehold/leasehold/lease"
)

// TestTakeoverPastLastAttempt: worker a runs the only attempt a job type
// allows and stalls (cut off from Redis) before recording anything; worker b
// (another group, same records) takes the key over after the lease TTL. The
// takeover is past the last attempt, so b must not run the handler again: it
// dead-letters the record (reason attempts-exhausted) and records the
// failure, which a later duplicate replays. This is also what a redelivery
// meets when a worker dead-lettered a record and died before recording the
// failure.
func TestTakeoverPastLastAttempt(t *testing.T) {
	h := setup(t, 1)
	const ttl = time.Second
	proxy, ra := h.proxiedRedis(t)

	var aRuns, bRuns atomic.Int32
	started := make(chan struct{}, 1)
	stall := func(ctx context.Context, _ *Job) ([]byte, error) {
		aRuns.Add(1)
		started <- struct{}{}
		<-ctx.Done() // the lease is lost while a is cut off
		return nil, context.Cause(ctx)
	}
	count := func(context.Context, *Job) ([]byte, error) {
		bRuns.Add(1)
		return []byte("ran"), nil
	}
	opts := []Opt{WithLeaseTTL(ttl), WithLeaseOptions(lease.WithRenewInterval(250 * time.Millisecond))}
	h.start(t, ra, func(w *Worker) { must(t, w.Register("test.once", stall, WithMaxAttempts(1))) }, opts...)
	h.produce(t, []*kgo.Record{jobRecord(t, NewJob{Type: "test.once", Key: "once-1"})})
	select {
	case <-started:
	case <-time.After(20 * time.Second):
		t.Fatal("worker a never ran the job")
	}
	proxy.Block()

	blog := newClaimLog()
	b := h.start(t, h.rdb, func(w *Worker) { must(t, w.Register("test.once", count, WithMaxAttempts(1))) },
		append(opts, WithGroup(h.group+"-b"), WithHooks(blog.hooks()))...)
	testkit.Eventually(t, 20*time.Second, "b takes the key over", func() bool { _, ok := blog.takeover("once-1"); return ok })
	testkit.Eventually(t, 20*time.Second, "b dead-letters the record", func() bool { return b.Stats().DeadLettered == 1 })
	if n := bRuns.Load(); n != 0 {
		t.Fatalf("b ran the handler %d times past the last attempt", n)
	}
	var reasons []string
	for _, r := range h.kafka.ReadAll(t, h.dlq) {
		reasons = append(reasons, string(headerValue(r.Headers, HeaderDLQReason)))
	}
	if len(reasons) != 1 || reasons[0] != ReasonAttemptsExceeded {
		t.Fatalf("dead-letter topic reasons %v, want exactly [%s]", reasons, ReasonAttemptsExceeded)
	}
	// The failure is recorded: a duplicate record replays it.
	h.produce(t, []*kgo.Record{jobRecord(t, NewJob{Type: "test.once", Key: "once-1"})})
	testkit.Eventually(t, 20*time.Second, "b replays the recorded failure", func() bool { return blog.saw("once-1", OutcomeDuplicate) })
	if n := bRuns.Load(); n != 0 || aRuns.Load() != 1 {
		t.Fatalf("handler runs: a %d, b %d; want 1 and 0", aRuns.Load(), n)
	}
	proxy.Unblock()
}
