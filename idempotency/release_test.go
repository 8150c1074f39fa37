package idempotency

import (
	"errors"
	"strings"
	"testing"
	"time"
)

// An attempt that runs past its claim window's end plus the retention finds
// the claim's bucket expired. Its release still leaves a record that claims
// read and that expires: the RELEASED record goes into the current window's
// bucket, with that bucket's expiry, so the next claim is held by a Keep and
// counts on from the attempt (written back into the claim's bucket, it would
// re-create that bucket without a TTL, in a window no claim reads: a leak,
// and the next claim a first attempt run at once).
func TestReleaseAfterClaimBucketExpired(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	e := setup(t, []Opt{WithRetention(200 * time.Millisecond), WithWindows(2)})
	c := e.claim(t, "long", fp("a"), Acquired)
	claimBucket := e.s.bucketKey(c.tag, c.window)
	// The job runs on (its lease renewed) until the claim's bucket expires.
	deadline := time.Now().Add(10 * time.Second)
	for {
		n, err := e.c.Exists(ctx, claimBucket).Result()
		if err != nil {
			t.Fatal(err)
		}
		if n == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("bucket %s did not expire", claimBucket)
		}
		time.Sleep(10 * time.Millisecond)
	}
	if err := c.Lease.Err(); err != nil {
		t.Fatalf("the lease was lost while the job ran: %v", err)
	}
	if err := e.s.Fail(ctx, c, Keep, errors.New("again")); err != nil {
		t.Fatalf("Fail(Keep): %v", err)
	}
	info, err := e.s.Lookup(ctx, "long")
	if err != nil {
		t.Fatal(err)
	}
	if info.State != Released || info.Attempt != 1 || info.Fence != c.Fence || !info.HoldUntil.After(time.Now()) {
		t.Fatalf("after the release: %+v, want RELEASED, attempt 1, fence %d, held", info, c.Fence)
	}
	for _, k := range e.keys(t) {
		if !strings.Contains(k, "idem:b:") {
			continue
		}
		d, err := e.c.PTTL(ctx, k).Result()
		if err != nil {
			t.Fatal(err)
		}
		if d < 0 {
			t.Errorf("bucket %s has no expiry (PTTL %v)", k, d)
		}
	}
	if c2 := e.claim(t, "long", fp("a"), Held); c2.Lease != nil {
		t.Fatalf("a held claim got a lease")
	}
}
