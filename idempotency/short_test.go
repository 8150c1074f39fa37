package idempotency

import (
	"errors"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/leasehold/leasehold/internal/scripts"
	"github.com/leasehold/leasehold/internal/testkit"
)

// shapes returns the claim and completion calls kept since the last call,
// each as "claim" or "complete" and "short" or "full" (the scripts' short
// flag: ARGV[9] of a claim, ARGV[7] of a completion), and forgets them.
func (h *argsHook) shapes() []string {
	h.mu.Lock()
	defer h.mu.Unlock()
	var out []string
	for _, a := range h.calls {
		name, flag := "claim", 9
		if a[1] == scripts.IdemCompleteBatch.Hash() {
			name, flag = "complete", 7
		}
		shape := "full"
		if nkeys, _ := strconv.Atoi(a[2]); len(a) > 2+nkeys+flag && a[2+nkeys+flag] == "1" {
			shape = "short"
		}
		out = append(out, name+" "+shape)
	}
	h.calls = nil
	return out
}

// A first attempt's claim and completion, and a duplicate's claim, go in
// short calls (the lease key, the result key and the buckets; the lease key
// and the claim's bucket). Every case that needs another key goes in a full
// call: the client sends it so when it knows (details to delete, a result
// too large for the bucket), and the script answers "full" and writes
// nothing when only Redis knows (a record to retry or take over, one that
// outlived its result key; a lease lost). The answers are those of a full
// call.
func TestShortCallsFallBackToFull(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	c, prefix := testkit.SharedRedis(t)
	h := &argsHook{}
	c.AddHook(cmdHook(h.keep))
	e := setupOn(t, c, prefix, nil)
	expect := func(step string, want ...string) {
		t.Helper()
		if got := h.shapes(); !slices.Equal(got, want) {
			t.Errorf("%s: calls %q, want %q", step, got, want)
		}
	}

	a := e.claim(t, "plain", fp("a"), Acquired)
	if err := e.s.Complete(ctx, a, []byte("done")); err != nil {
		t.Fatalf("Complete: %v", err)
	}
	e.claim(t, "plain", fp("a"), Duplicate)
	e.claim(t, "plain", fp("b"), Mismatch)
	expect("a first attempt, its duplicate and a mismatch", "claim short", "complete short", "claim short", "claim short")

	big := strings.Repeat("r", 4*e.s.inline)
	b := e.claim(t, "big", fp("a"), Acquired)
	if err := e.s.Complete(ctx, b, []byte(big)); err != nil {
		t.Fatalf("Complete of a large result: %v", err)
	}
	dup := e.claim(t, "big", fp("a"), Duplicate)
	if dup.Record == nil || string(dup.Record.Result) != big {
		t.Errorf("the duplicate of a large result replays %+v", dup.Record)
	}
	expect("a result in its own key", "claim short", "complete full", "claim short")
	if err := c.Del(ctx, prefix+"idem:r:"+e.s.Tag("big")+":big").Err(); err != nil {
		t.Fatal(err)
	}
	again := e.claim(t, "big", fp("a"), Acquired)
	if again.PrevFence != b.Fence {
		t.Errorf("the claim after the result key expired names previous fence %d, want %d", again.PrevFence, b.Fence)
	}
	expect("a record that outlived its result key", "claim short", "claim full")

	d := e.claim(t, "details", fp("a"), Acquired)
	if err := e.s.SaveDetails(ctx, d, []byte("step 1")); err != nil {
		t.Fatalf("SaveDetails: %v", err)
	}
	if err := e.s.Fail(ctx, d, Retryable, errors.New("again")); err != nil {
		t.Fatalf("Fail: %v", err)
	}
	d = e.claim(t, "details", fp("a"), Acquired)
	if string(d.Details) != "step 1" || d.Attempt != 2 {
		t.Errorf("the retry got details %q, attempt %d; want %q, 2", d.Details, d.Attempt, "step 1")
	}
	if err := e.s.Complete(ctx, d, []byte("done")); err != nil {
		t.Fatalf("Complete of the retry: %v", err)
	}
	expect("a retry with details", "claim short", "claim short", "claim full", "complete full")

	held := e.claim(t, "held", fp("a"), Acquired)
	e.claim(t, "held", fp("a"), Held)
	expect("a held key", "claim short", "claim short")
	if err := c.Del(ctx, e.m.Key(e.s.LeaseName("held"))).Err(); err != nil {
		t.Fatal(err)
	}
	over := e.claim(t, "held", fp("a"), Takeover)
	if over.PrevFence != held.Fence {
		t.Errorf("the takeover names previous fence %d, want %d", over.PrevFence, held.Fence)
	}
	expect("a takeover", "claim short", "claim full")
	err := e.s.Complete(ctx, held, []byte("late"))
	if !errors.Is(err, ErrLeaseLost) {
		t.Errorf("the old holder's completion: %v, want ErrLeaseLost", err)
	}
	expect("a completion whose lease was taken", "complete short", "complete full")
	if err := e.s.Complete(ctx, over, []byte("done")); err != nil {
		t.Fatalf("Complete of the takeover: %v", err)
	}
	expect("a takeover's completion (its entry is in the history list)", "complete full")
}
