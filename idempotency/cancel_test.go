package idempotency

import (
	"errors"
	"strconv"
	"testing"

	"github.com/leasehold/leasehold/internal/scripts"
)

// cancelAttempt stores an operator's cancel of c's attempt as package
// inspect does (lease_cancel.lua with the key's cancel mark).
func cancelAttempt(t *testing.T, e *env, c *Claim) {
	t.Helper()
	code, err := scripts.LeaseCancel.Run(t.Context(), e.c, []string{e.m.Key(c.Lease.Name()), e.s.CancelMarkKey(c.Key)},
		strconv.FormatUint(c.Fence, 10), e.s.Retention().Milliseconds()).Int64()
	if err != nil || code != scripts.LeaseCancelStored {
		t.Fatalf("cancel: %d, %v", code, err)
	}
}

// loseLease expires c's lease in Redis and waits for its Manager to see it.
func loseLease(t *testing.T, e *env, c *Claim) {
	t.Helper()
	if err := e.c.Del(t.Context(), e.m.Key(c.Lease.Name())).Err(); err != nil {
		t.Fatal(err)
	}
	<-c.Lease.Done()
}

// TestClaimCoveredByCancel: a cancelled attempt that loses its lease before
// it records the cancel leaves the key covered: the takeover's claim says so
// (Claim.Cancelled), and so does the takeover of that takeover; one released
// for a retry first too. A cancel of another fence, or none, covers nothing;
// the mark keeps the record's retention.
func TestClaimCoveredByCancel(t *testing.T) {
	t.Parallel()
	e := setup(t, nil)
	ctx := t.Context()
	fpA := fp("a")

	c1, err := e.s.Claim(ctx, "lost", fpA)
	if err != nil || c1.Cancelled {
		t.Fatalf("first claim: %+v, %v", c1, err)
	}
	cancelAttempt(t, e, c1)
	if ttl := e.c.PTTL(ctx, e.s.CancelMarkKey("lost")).Val(); ttl <= 0 || ttl > e.s.Retention() {
		t.Fatalf("cancel mark TTL %s, want up to the retention %s", ttl, e.s.Retention())
	}
	loseLease(t, e, c1)
	c2, err := e.s.Claim(ctx, "lost", fpA)
	if err != nil || c2.Outcome != Takeover || !c2.Cancelled || c2.PrevFence != c1.Fence {
		t.Fatalf("takeover of the cancelled attempt: %+v, %v", c2, err)
	}
	if v := e.c.Get(ctx, e.s.CancelMarkKey("lost")).Val(); v != strconv.FormatUint(c2.Fence, 10) {
		t.Fatalf("mark %q, want the takeover's fence %d", v, c2.Fence)
	}
	// The covered attempt is lost too before it records: still covered.
	loseLease(t, e, c2)
	c3, err := e.s.Claim(ctx, "lost", fpA)
	if err != nil || c3.Outcome != Takeover || !c3.Cancelled {
		t.Fatalf("takeover of the covered attempt: %+v, %v", c3, err)
	}
	if err := e.s.Fail(ctx, c3, Terminal, errors.New("cancelled")); err != nil {
		t.Fatal(err)
	}

	// Released for a retry before it learnt of the cancel.
	r1, err := e.s.Claim(ctx, "retried", fpA)
	if err != nil {
		t.Fatal(err)
	}
	cancelAttempt(t, e, r1)
	if err := e.s.Fail(ctx, r1, Retryable, errors.New("flaky")); err != nil {
		t.Fatal(err)
	}
	r2, err := e.s.Claim(ctx, "retried", fpA)
	if err != nil || r2.Outcome != Acquired || !r2.Cancelled || r2.PrevFence != r1.Fence {
		t.Fatalf("claim after the released cancelled attempt: %+v, %v", r2, err)
	}
	if err := e.s.Complete(ctx, r2, nil); err != nil {
		t.Fatal(err)
	}

	// Not covered: a takeover with no cancel, and one whose mark names
	// another fence (a cancel of an earlier life of the key).
	n1, err := e.s.Claim(ctx, "plain", fpA)
	if err != nil {
		t.Fatal(err)
	}
	loseLease(t, e, n1)
	if n2, err := e.s.Claim(ctx, "plain", fpA); err != nil || n2.Outcome != Takeover || n2.Cancelled {
		t.Fatalf("takeover without a cancel: %+v, %v", n2, err)
	} else {
		if err := e.c.Set(ctx, e.s.CancelMarkKey("plain"), strconv.FormatUint(n1.Fence-1, 10), 0).Err(); err != nil {
			t.Fatal(err)
		}
		loseLease(t, e, n2)
	}
	if n3, err := e.s.Claim(ctx, "plain", fpA); err != nil || n3.Outcome != Takeover || n3.Cancelled {
		t.Fatalf("takeover with another fence's mark: %+v, %v", n3, err)
	}
}
