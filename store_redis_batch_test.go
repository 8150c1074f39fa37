package leasehold

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/leasehold/leasehold/idempotency"
	"github.com/leasehold/leasehold/internal/testkit"
)

// TestCompletionBatcherStops checks the completion queue's shutdown: what a
// job handed in before the batcher was told to stop is still sent and
// answered (its record COMPLETED), and a completion handed in after the
// batcher stopped is refused at once as a lease given up at shutdown
// (ErrShutdown, an ErrLeaseLost: the key runs again elsewhere, never marked
// done or failed) instead of waiting for an answer that never comes.
func TestCompletionBatcherStops(t *testing.T) {
	t.Parallel()
	rdb, prefix := testkit.SharedRedis(t)
	rs := sealedStore(t, rdb, prefix, nil)
	ctx := t.Context()
	claim := func(k string) *idempotency.Claim {
		t.Helper()
		fp, err := rs.s.Fingerprint([]byte("payload of " + k))
		must(t, err)
		c, err := rs.s.Claim(ctx, k, fp)
		if err != nil || c.Outcome != idempotency.Acquired {
			t.Fatalf("claim %s: %v, %v", k, c.Outcome, err)
		}
		return c
	}
	// A batcher of its own over the same store, not started yet: the
	// requests wait in its queue when it is told to stop.
	q := &redisStore{s: rs.s}
	q.initBatcher()
	var reqs []completion
	for i := range 3 {
		r := completion{c: claim(fmt.Sprintf("queued-%d", i)), result: []byte("ok"), done: make(chan error, 1)}
		select {
		case q.completions <- r:
		default:
			t.Fatal("handing a completion in waited for the batcher: the queue is not buffered")
		}
		reqs = append(reqs, r)
	}
	stop := make(chan struct{})
	close(stop)
	go q.completeLoop(context.Background(), stop)
	for i, r := range reqs {
		select {
		case err := <-r.done:
			if err != nil {
				t.Errorf("queued completion %d: %v", i, err)
			}
		case <-time.After(10 * time.Second):
			t.Fatalf("queued completion %d was not answered", i)
		}
		info, err := rs.s.Lookup(ctx, fmt.Sprintf("queued-%d", i))
		if err != nil || info.State != idempotency.Completed {
			t.Errorf("queued-%d after the stop: %v, %v; want COMPLETED", i, info.State, err)
		}
	}
	<-q.completeDone
	late := &redisAttempt{rs: q, ic: claim("late")}
	if err := late.Complete(ctx, []byte("ok")); !errors.Is(err, ErrShutdown) || !errors.Is(err, ErrLeaseLost) {
		t.Errorf("Complete after the batcher stopped = %v; want ErrShutdown, an ErrLeaseLost", err)
	}
	if info, err := rs.s.Lookup(ctx, "late"); err != nil || info.State != idempotency.Processing {
		t.Errorf("late after a refused completion: %v, %v; want PROCESSING (nothing written)", info.State, err)
	}
}
