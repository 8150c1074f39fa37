package idempotency

import (
	"errors"
	"testing"
	"time"

	"github.com/leasehold/leasehold/internal/testkit"
	"github.com/leasehold/leasehold/lease"
)

// readDetails returns the stored details of key k ("" if none).
func (e *env) readDetails(t *testing.T, c *Claim) string {
	t.Helper()
	v, err := e.c.Get(t.Context(), e.s.detailsKey(c.tag, c.Key)).Result()
	if err != nil {
		return ""
	}
	return v
}

func TestDetailsCoalescedIntoRenewRound(t *testing.T) {
	t.Parallel()
	e := setup(t, nil, lease.WithTTL(3*time.Second), lease.WithRenewInterval(300*time.Millisecond))
	ctx := t.Context()
	c := e.claim(t, "k", fp("a"), Acquired)
	if err := e.s.SaveDetails(ctx, c, []byte("step 1")); err != nil {
		t.Fatal(err)
	}
	if got := e.readDetails(t, c); got != "step 1" {
		t.Fatalf("first details %q, want them written at once", got)
	}
	for _, d := range []string{"step 2", "step 3", "step 4"} {
		if err := e.s.SaveDetails(ctx, c, []byte(d)); err != nil {
			t.Fatal(err)
		}
	}
	if got := e.readDetails(t, c); got != "step 1" {
		t.Fatalf("details %q before a renew round, want the coalesced ones still pending", got)
	}
	testkit.Eventually(t, 3*time.Second, "the latest details (step 4) written by a renew round",
		func() bool { return e.readDetails(t, c) == "step 4" })
	if err := e.s.Complete(ctx, c, nil); err != nil {
		t.Fatal(err)
	}
}

func TestDetailsAtOnce(t *testing.T) {
	t.Parallel()
	e := setup(t, []Opt{WithDetailsAtOnce()}, lease.WithTTL(30*time.Second))
	ctx := t.Context()
	c := e.claim(t, "k", fp("a"), Acquired)
	for _, d := range []string{"step 1", "step 2", "step 3"} {
		if err := e.s.SaveDetails(ctx, c, []byte(d)); err != nil {
			t.Fatal(err)
		}
		if got := e.readDetails(t, c); got != d {
			t.Fatalf("details %q after SaveDetails(%q), want them written at once", got, d)
		}
	}
	if err := e.s.Complete(ctx, c, nil); err != nil {
		t.Fatal(err)
	}
}

func TestDetailsFlushedOnFailure(t *testing.T) {
	t.Parallel()
	// A renew interval far beyond the test: only Fail can write the pending details.
	e := setup(t, nil, lease.WithTTL(time.Minute), lease.WithRenewInterval(50*time.Second))
	ctx := t.Context()
	c1 := e.claim(t, "k", fp("a"), Acquired)
	for _, d := range []string{"page 1", "page 2", "page 3"} {
		if err := e.s.SaveDetails(ctx, c1, []byte(d)); err != nil {
			t.Fatal(err)
		}
	}
	if err := e.s.Fail(ctx, c1, Retryable, errors.New("timeout")); err != nil {
		t.Fatal(err)
	}
	c2 := e.claim(t, "k", fp("a"), Acquired)
	if string(c2.Details) != "page 3" {
		t.Fatalf("retry reads details %q, want the last pending ones (page 3)", c2.Details)
	}
	// Completed: pending details are dropped with the key's details.
	for _, d := range []string{"again 1", "again 2"} {
		if err := e.s.SaveDetails(ctx, c2, []byte(d)); err != nil {
			t.Fatal(err)
		}
	}
	if err := e.s.Complete(ctx, c2, nil); err != nil {
		t.Fatal(err)
	}
	e.s.flushDetails(ctx)
	if n, _ := e.c.Exists(ctx, e.s.detailsKey(c2.tag, "k")).Result(); n != 0 {
		t.Fatal("details left after Complete")
	}
}

func TestZombieCoalescedDetailsRefused(t *testing.T) {
	t.Parallel()
	c, prefix := testkit.SharedRedis(t)
	ctx := t.Context()
	zombie := setupOn(t, c, prefix, nil, lease.WithTTL(10*time.Second), lease.WithRenewInterval(9*time.Second))
	owner := setupOn(t, c, prefix, nil)
	z := zombie.claim(t, "k", fp("a"), Acquired)
	if err := zombie.s.SaveDetails(ctx, z, []byte("zombie 1")); err != nil {
		t.Fatal(err)
	}
	if err := c.Del(ctx, zombie.m.Key(z.Lease.Name())).Err(); err != nil {
		t.Fatal(err)
	}
	n := owner.claim(t, "k", fp("a"), Takeover)
	if string(n.Details) != "zombie 1" {
		t.Fatalf("takeover reads %q, want the zombie's last written details", n.Details)
	}
	if err := owner.s.SaveDetails(ctx, n, []byte("owner 1")); err != nil {
		t.Fatal(err)
	}
	// The zombie's coalesced details reach Redis with its next round: refused.
	if err := zombie.s.SaveDetails(ctx, z, []byte("zombie 2")); err != nil {
		t.Fatalf("zombie's coalesced SaveDetails = %v, want nil until a flush", err)
	}
	zombie.s.flushDetails(ctx)
	if got := owner.readDetails(t, n); got != "owner 1" {
		t.Fatalf("details %q after the zombie's flush, want the owner's", got)
	}
	if err := zombie.s.SaveDetails(ctx, z, []byte("zombie 3")); !errors.Is(err, ErrLeaseLost) {
		t.Fatalf("zombie SaveDetails after a refused flush = %v, want ErrLeaseLost", err)
	}
	if err := owner.s.Complete(ctx, n, []byte("done")); err != nil {
		t.Fatal(err)
	}
}
