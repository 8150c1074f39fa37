package inspect_test

import (
	"errors"
	"testing"
	"time"

	"github.com/leasehold/leasehold/idempotency"
	"github.com/leasehold/leasehold/inspect"
)

// TestCancelReachesHolderThroughRenewal: a cancel of a running key is stored
// for its fence, and the holder's next lease renewal reports it (OnCancel
// runs); the lease stays held, so the holder can still record the outcome.
// A second cancel is harmless; a finished, unknown or released key is
// refused.
func TestCancelReachesHolderThroughRenewal(t *testing.T) {
	t.Parallel()
	e := setup(t)
	ctx := t.Context()
	if _, err := e.in.Cancel(ctx, "never", "x"); !errors.Is(err, inspect.ErrUnknownKey) {
		t.Fatalf("Cancel of an unknown key: %v, want ErrUnknownKey", err)
	}
	c := e.claim(t, "c1", idempotency.Acquired)
	seen := make(chan struct{})
	c.Lease.OnCancel(func() { close(seen) })
	r, err := e.in.Cancel(ctx, "c1", "operator test")
	must(t, err)
	if r.Fence != c.Fence {
		t.Fatalf("Cancel fence %d, want %d", r.Fence, c.Fence)
	}
	if _, err := e.in.Cancel(ctx, "c1", "again"); err != nil {
		t.Fatalf("second Cancel: %v", err)
	}
	select {
	case <-seen:
	case <-time.After(5 * time.Second): // renew interval TTL/3 = 667 ms, with slack for a loaded machine
		t.Fatal("the holder's renewals did not report the cancel")
	}
	if !c.Lease.Cancelled() || c.Lease.Err() != nil {
		t.Fatalf("after the cancel: Cancelled %v, lease err %v; want true, held", c.Lease.Cancelled(), c.Lease.Err())
	}
	must(t, e.s.Fail(ctx, c, idempotency.Terminal, errors.New("cancelled")))
	if _, err := e.in.Cancel(ctx, "c1", ""); !errors.Is(err, inspect.ErrFinished) {
		t.Fatalf("Cancel of a failed key: %v, want ErrFinished", err)
	}
	c2 := e.claim(t, "c2", idempotency.Acquired)
	must(t, e.s.Fail(ctx, c2, idempotency.Retryable, errors.New("again")))
	if _, err := e.in.Cancel(ctx, "c2", ""); !errors.Is(err, inspect.ErrNotRunning) {
		t.Fatalf("Cancel of a released key: %v, want ErrNotRunning", err)
	}
}
