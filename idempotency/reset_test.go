package idempotency

import (
	"errors"
	"strconv"
	"strings"
	"testing"
	"time"
)

// TestResetRunsAgain: a key failed terminally is replayed as a Duplicate and
// a fixed payload is refused as a Mismatch; after Reset the fixed payload
// runs as a first claim, with a fence above every earlier one, and the
// details and record are gone.
func TestResetRunsAgain(t *testing.T) {
	t.Parallel()
	e := setup(t, nil)
	ctx := t.Context()
	c := e.claim(t, "k", fp("bad"), Acquired)
	if err := e.s.SaveDetails(ctx, c, []byte("step 2")); err != nil {
		t.Fatal(err)
	}
	if err := e.s.Fail(ctx, c, Terminal, errors.New("bad payload")); err != nil {
		t.Fatal(err)
	}
	<-c.Lease.Done()
	e.claim(t, "k", fp("bad"), Duplicate)
	e.claim(t, "k", fp("fixed"), Mismatch)

	r, err := e.s.Reset(ctx, "k", false)
	if err != nil {
		t.Fatalf("Reset: %v", err)
	}
	if r.State != Failed || r.Fence != c.Fence || r.LeaseEnded {
		t.Fatalf("Reset = %+v, want state FAILED, fence %d, no lease ended", r, c.Fence)
	}
	info, err := e.s.Lookup(ctx, "k")
	if err != nil || info.State != Absent || info.HasDetails {
		t.Fatalf("Lookup after Reset = %+v, %v; want no record and no details", info, err)
	}
	again := e.claim(t, "k", fp("fixed"), Acquired)
	if again.Attempt != 1 || again.Fence <= c.Fence {
		t.Fatalf("claim after Reset: attempt %d fence %d; want attempt 1 and a fence above %d", again.Attempt, again.Fence, c.Fence)
	}
	if err := e.s.Complete(ctx, again, []byte("ok")); err != nil {
		t.Fatal(err)
	}
	// A reset of a key without a record changes nothing and says so.
	if r, err := e.s.Reset(ctx, "never-seen", false); err != nil || r.State != Absent || r.Fence != 0 {
		t.Fatalf("Reset of an unknown key = %+v, %v", r, err)
	}
}

// TestResetLiveLease: a live lease refuses a reset; a forced one ends the
// lease, so that its holder loses it and its commit is refused, and the next
// claim runs with a higher fence.
func TestResetLiveLease(t *testing.T) {
	t.Parallel()
	e := setup(t, nil)
	ctx := t.Context()
	c := e.claim(t, "k", fp("a"), Acquired)

	_, err := e.s.Reset(ctx, "k", false)
	var he *ResetHeldError
	if !errors.As(err, &he) || !errors.Is(err, ErrResetHeld) || he.Fence != c.Fence || he.Remaining <= 0 {
		t.Fatalf("Reset of a held key = %v, want a *ResetHeldError with the lease's fence", err)
	}
	e.claim(t, "k", fp("a"), Held)

	r, err := e.s.Reset(ctx, "k", true)
	if err != nil || !r.LeaseEnded || r.State != Processing || r.Fence != c.Fence {
		t.Fatalf("forced Reset = %+v, %v; want the lease ended, state PROCESSING, fence %d", r, err, c.Fence)
	}
	select {
	case <-c.Lease.Done():
	case <-time.After(5 * time.Second):
		t.Fatal("the holder did not lose its lease after a forced reset")
	}
	if err := e.s.Complete(ctx, c, []byte("late")); !errors.Is(err, ErrLeaseLost) {
		t.Fatalf("the old holder's commit after a forced reset = %v, want ErrLeaseLost", err)
	}
	next := e.claim(t, "k", fp("b"), Acquired)
	if next.Fence <= c.Fence || next.Attempt != 1 {
		t.Fatalf("claim after a forced reset: fence %d attempt %d; want a fence above %d, attempt 1", next.Fence, next.Attempt, c.Fence)
	}
}

// TestResetRefusedAheadOfClock: a fence ahead of Redis time (a clock that
// went back) refuses the reset with nothing written, since a claim after it
// would take a lower fence from the clock.
func TestResetRefusedAheadOfClock(t *testing.T) {
	t.Parallel()
	e := setup(t, nil)
	ctx := t.Context()
	c := e.claim(t, "k", fp("a"), Acquired)
	leaseKey := e.m.Key(e.s.LeaseName("k"))
	ahead := uint64(time.Now().Add(time.Hour).UnixMicro())
	held := strings.Fields(e.c.Get(ctx, leaseKey).Val()) // token, fence, TTL
	if len(held) != 3 {
		t.Fatalf("lease key holds %q", held)
	}
	held[1] = strconv.FormatUint(ahead, 10)
	if err := e.c.Do(ctx, "set", leaseKey, strings.Join(held, " "), "keepttl").Err(); err != nil {
		t.Fatal(err)
	}
	if _, err := e.s.Reset(ctx, "k", true); !errors.Is(err, ErrResetClock) {
		t.Fatalf("Reset with a fence ahead of the clock = %v, want ErrResetClock", err)
	}
	info, err := e.s.Lookup(ctx, "k")
	if err != nil || info.State != Processing || info.Fence != c.Fence {
		t.Fatalf("after a refused reset: %+v, %v; want the record and lease untouched", info, err)
	}
}
