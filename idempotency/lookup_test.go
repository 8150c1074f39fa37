package idempotency

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/leasehold/leasehold/internal/testkit"
	"github.com/leasehold/leasehold/lease"
)

func TestLookupAbsent(t *testing.T) {
	t.Parallel()
	e := setup(t, nil)
	got, err := e.s.Lookup(t.Context(), "never-seen")
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(Info{Key: "never-seen"}, got); diff != "" {
		t.Fatalf("absent key (-want +got):\n%s", diff)
	}
	if got.State.String() != "ABSENT" {
		t.Fatalf("state string %q", got.State)
	}
	if len(e.keys(t)) != 0 {
		t.Fatalf("Lookup wrote keys: %v", e.keys(t))
	}
	var ke *KeyError
	if _, err := e.s.Lookup(t.Context(), "bad\nkey"); !errors.As(err, &ke) {
		t.Fatalf("control character key: %v, want *KeyError", err)
	}
}

func TestLookupProcessingWithDetails(t *testing.T) {
	t.Parallel()
	e := setup(t, nil)
	ctx := t.Context()
	c := e.claim(t, "job", fp("a"), Acquired)
	if err := e.s.SaveDetails(ctx, c, []byte(`{"page":3}`)); err != nil {
		t.Fatal(err)
	}
	before := e.keys(t)
	got, err := e.s.Lookup(ctx, "job")
	if err != nil {
		t.Fatal(err)
	}
	if got.State != Processing || got.Fence != c.Fence || got.Attempt != 1 || got.Fingerprint != fp("a") {
		t.Fatalf("record: %+v, want PROCESSING fence %d attempt 1", got, c.Fence)
	}
	if !got.Leased || got.LeaseFence != c.Fence || got.Remaining <= 0 || got.Remaining > e.m.TTL() {
		t.Fatalf("lease: leased %v fence %d remaining %v (TTL %v)", got.Leased, got.LeaseFence, got.Remaining, e.m.TTL())
	}
	if !got.HasDetails || string(got.Details) != `{"page":3}` || got.DetailsSize != len(`{"page":3}`) ||
		got.DetailsTTL <= 0 || got.DetailsTTL > e.s.Retention() {
		t.Fatalf("details: %v %q size %d ttl %v", got.HasDetails, got.Details, got.DetailsSize, got.DetailsTTL)
	}
	if diff := cmp.Diff(before, e.keys(t)); diff != "" {
		t.Fatalf("Lookup changed the key set:\n%s", diff)
	}
	// Lookup reads; it does not take the key: the holder still completes it.
	if err := e.s.Complete(ctx, c, []byte("done")); err != nil {
		t.Fatal(err)
	}
}

func TestLookupExpiredProcessing(t *testing.T) {
	t.Parallel()
	c, prefix := testkit.SharedRedis(t)
	a := setupOn(t, c, prefix, nil, lease.WithTTL(time.Second), lease.WithLeaveOnShutdown(true))
	cl := a.claim(t, "job", fp("a"), Acquired)
	if err := a.m.Shutdown(t.Context()); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(5 * time.Second)
	for {
		got, err := a.s.Lookup(t.Context(), "job")
		if err != nil {
			t.Fatal(err)
		}
		if got.State != Processing || got.Fence != cl.Fence {
			t.Fatalf("record %+v, want PROCESSING fence %d", got, cl.Fence)
		}
		if !got.Leased {
			return // the crashed attempt's lease expired; the record stays PROCESSING
		}
		if time.Now().After(deadline) {
			t.Fatal("the lease of a stopped Manager stayed live")
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func TestLookupReleased(t *testing.T) {
	t.Parallel()
	e := setup(t, []Opt{WithKeepHold(time.Second)})
	ctx := t.Context()

	c := e.claim(t, "retry", fp("a"), Acquired)
	if err := e.s.SaveDetails(ctx, c, []byte("step 2")); err != nil {
		t.Fatal(err)
	}
	if err := e.s.Fail(ctx, c, Retryable, errors.New("timeout")); err != nil {
		t.Fatal(err)
	}
	got, err := e.s.Lookup(ctx, "retry")
	if err != nil {
		t.Fatal(err)
	}
	if got.State != Released || got.Fence != c.Fence || got.Attempt != 1 || got.Leased || !got.HoldUntil.IsZero() {
		t.Fatalf("retryable: %+v", got)
	}
	if string(got.Details) != "step 2" {
		t.Fatalf("details %q kept for the next attempt, want %q", got.Details, "step 2")
	}

	k := e.claim(t, "keep", fp("a"), Acquired)
	sent := time.Now()
	if err := e.s.Fail(ctx, k, Keep, errors.New("rate limited")); err != nil {
		t.Fatal(err)
	}
	got, err = e.s.Lookup(ctx, "keep")
	if err != nil {
		t.Fatal(err)
	}
	if got.State != Released || got.HoldUntil.IsZero() || got.HasDetails {
		t.Fatalf("keep: %+v", got)
	}
	// The hold is Redis time; allow the clock offset of one machine.
	if d := got.HoldUntil.Sub(sent); d < 500*time.Millisecond || d > 2*time.Second {
		t.Fatalf("hold until %v, %v after Fail was sent; want about the 1s keep hold", got.HoldUntil, d)
	}
}

func TestLookupCompletedAndFailed(t *testing.T) {
	t.Parallel()
	e := setup(t, []Opt{WithShards(1)})
	ctx := t.Context()
	big := strings.Repeat("r", 5000) // kept in its own result key
	for i, res := range []string{"small", big} {
		k := fmt.Sprintf("done-%d", i)
		c := e.claim(t, k, fp("a"), Acquired)
		start := time.Now().Truncate(time.Second)
		if err := e.s.Complete(ctx, c, []byte(res)); err != nil {
			t.Fatal(err)
		}
		got, err := e.s.Lookup(ctx, k)
		if err != nil {
			t.Fatal(err)
		}
		if got.State != Completed || got.Fence != c.Fence || got.ResultSize != len(res) || got.Result != nil ||
			got.Leased || got.HasDetails {
			t.Fatalf("%d-byte result: %+v", len(res), got)
		}
		if got.At.Before(start.Add(-2*time.Second)) || got.At.After(time.Now().Add(2*time.Second)) {
			t.Fatalf("completed at %v, test ran from %v", got.At, start)
		}
		full, err := e.s.LookupResult(ctx, k)
		if err != nil {
			t.Fatal(err)
		}
		if string(full.Result) != res || full.ResultSize != len(res) {
			t.Fatalf("LookupResult: %d bytes (size %d), want %d", len(full.Result), full.ResultSize, len(res))
		}
	}

	c := e.claim(t, "failed", fp("a"), Acquired)
	if err := e.s.Fail(ctx, c, Terminal, errors.New("card declined")); err != nil {
		t.Fatal(err)
	}
	got, err := e.s.LookupResult(ctx, "failed")
	if err != nil {
		t.Fatal(err)
	}
	if got.State != Failed || got.Fence != c.Fence || got.ResultSize != len(got.Result) ||
		!strings.Contains(string(got.Result), "card declined") || got.Leased {
		t.Fatalf("failed: %+v", got)
	}
}

func TestLookupCorruptRecord(t *testing.T) {
	t.Parallel()
	e := setup(t, nil)
	ctx := t.Context()
	c := e.claim(t, "k", fp("a"), Acquired)
	if err := e.s.Complete(ctx, c, []byte("ok")); err != nil {
		t.Fatal(err)
	}
	h := hashKey("k")
	buckets, err := e.c.Keys(ctx, e.prefix+"idem:b:*").Result()
	if err != nil || len(buckets) != 1 {
		t.Fatalf("buckets %v (%v), want one", buckets, err)
	}
	if err := e.c.HSet(ctx, buckets[0], h.field(), "xyz").Err(); err != nil {
		t.Fatal(err)
	}
	if _, err := e.s.Lookup(ctx, "k"); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("Lookup of a 3-byte record: %v, want ErrCorrupt", err)
	}
}
