package chaos

import (
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/anishathalye/porcupine"
	"github.com/redis/go-redis/v9"

	"github.com/leasehold/leasehold/idempotency"
	"github.com/leasehold/leasehold/internal/testkit"
	"github.com/leasehold/leasehold/lease"
)

// TestHistoryDecodesTheScripts runs the idempotency store's real scripts
// through a Link with a History tap and checks what the history decoded:
// claims (acquired, duplicate; alone and batched), commits (single and batched, the results
// replayed by later duplicates) and a release, each key's operations in
// order, and the whole linearizable. A change of a script's KEYS, ARGV or
// reply layout that the history does not follow fails here.
func TestHistoryDecodesTheScripts(t *testing.T) {
	t.Parallel()
	srv := testkit.StartRedis(t)
	h := NewHistory()
	l, err := NewLink(t.Context(), srv.Addr(), func() Tap { return h.tap("w1") })
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	rdb := redis.NewClient(&redis.Options{Addr: l.Addr()})
	ctx := t.Context()
	m, err := lease.NewManager(rdb, lease.WithTTL(5*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	if err := m.Start(ctx); err != nil {
		t.Fatal(err)
	}
	store, err := idempotency.New(ctx, rdb, m)
	if err != nil {
		t.Fatal(err)
	}
	fp, _ := store.Fingerprint([]byte("payload"))
	claim := func(k string) *idempotency.Claim {
		t.Helper()
		c, err := store.Claim(ctx, k, fp)
		if err != nil {
			t.Fatalf("claim %s: %v", k, err)
		}
		return c
	}
	a := claim("a")
	if err := store.Complete(ctx, a, []byte("result-a")); err != nil {
		t.Fatal(err)
	}
	claim("a") // a duplicate
	// b and c in one claim call: the history must find the second entry's
	// keys after the first's (the script's per-entry KEYS layout).
	cs := store.ClaimBatch(ctx, []idempotency.Request{{Key: "b", Fingerprint: fp}, {Key: "c", Fingerprint: fp}})
	b, c := cs[0], cs[1]
	if b.Err != nil || c.Err != nil {
		t.Fatal(b.Err, c.Err)
	}
	if errs := store.CompleteBatch(ctx, []idempotency.Completion{{Claim: b, Result: []byte("result-b")},
		{Claim: c, Result: []byte("result-c")}}); errors.Join(errs...) != nil {
		t.Fatal(errs)
	}
	claim("b")
	d := claim("d")
	if err := store.Fail(ctx, d, idempotency.Retryable, errors.New("again")); err != nil {
		t.Fatal(err)
	}
	d2 := claim("d")
	if err := m.Shutdown(ctx); err != nil {
		t.Fatal(err)
	}
	_ = rdb.Close()
	l.Close() // the taps see every connection end

	got := map[string][]string{}
	for _, op := range h.Operations() {
		in, out := op.Input.(Op), op.Output.(OpOutput)
		if out.Unknown {
			t.Errorf("%s has no answer, though every call was answered", describeOp(in, out))
		}
		got[in.Key] = append(got[in.Key], describeOp(in, out))
	}
	want := map[string][]string{
		"a": {
			fmt.Sprintf("claim(a) -> code=1 fence=%d prev=0", a.Fence),
			fmt.Sprintf("commit(a, fence=%d, state=3, %q) -> 1", a.Fence, "result-a"),
			fmt.Sprintf("claim(a) -> duplicate fence=%d state=3 result=%q", a.Fence, "result-a"),
		},
		"b": {
			fmt.Sprintf("claim(b) -> code=1 fence=%d prev=0", b.Fence),
			fmt.Sprintf("commit(b, fence=%d, state=3, %q) -> 1", b.Fence, "result-b"),
			fmt.Sprintf("claim(b) -> duplicate fence=%d state=3 result=%q", b.Fence, "result-b"),
		},
		"c": {
			fmt.Sprintf("claim(c) -> code=1 fence=%d prev=0", c.Fence),
			fmt.Sprintf("commit(c, fence=%d, state=3, %q) -> 1", c.Fence, "result-c"),
		},
		"d": {
			fmt.Sprintf("claim(d) -> code=1 fence=%d prev=0", d.Fence),
			fmt.Sprintf("release(d, fence=%d) -> 1", d.Fence),
			"claim(d) -> code=8 fence=0 prev=0", // a short call finds the record: claimed again in a full one
			fmt.Sprintf("claim(d) -> code=1 fence=%d prev=%d", d2.Fence, d.Fence),
		},
	}
	for k, w := range want {
		if !slices.Equal(got[k], w) {
			t.Errorf("key %s: history\n%q\nwant\n%q", k, got[k], w)
		}
	}
	if h.Unparsed() != 0 {
		t.Errorf("%d connections did not parse as RESP", h.Unparsed())
	}
	v, err := CheckHistory(h.Operations(), t.TempDir(), time.Minute)
	if err != nil || v.Result != porcupine.Ok {
		t.Fatalf("the store's own history: %v, %v %v", v.Result, v.Offending, err)
	}
	if v.Claims != 7 || v.ClaimsFull != 1 {
		t.Errorf("counted %d claims and %d answered full, want 7 and 1", v.Claims, v.ClaimsFull)
	}
}
