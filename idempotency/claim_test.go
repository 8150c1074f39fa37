package idempotency

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/leasehold/leasehold/internal/leasing"
	"github.com/leasehold/leasehold/internal/testkit"
	"github.com/leasehold/leasehold/lease"
)

func TestAcquiredCompleteDuplicate(t *testing.T) {
	t.Parallel()
	e := setup(t, nil)
	ctx := t.Context()
	c := e.claim(t, "order-1", fp("a"), Acquired)
	if c.Attempt != 1 || c.PrevFence != 0 || c.Details != nil || c.Lease == nil {
		t.Fatalf("acquired claim = attempt %d prev %d details %q lease %v", c.Attempt, c.PrevFence, c.Details, c.Lease)
	}
	if c.Fence != c.Lease.Fence() {
		t.Fatalf("claim fence %d, lease fence %d", c.Fence, c.Lease.Fence())
	}
	before := time.Now().Add(-2 * time.Second)
	if err := e.s.Complete(ctx, c, []byte("done")); err != nil {
		t.Fatalf("Complete: %v", err)
	}
	select {
	case <-c.Lease.Done():
	case <-time.After(time.Second):
		t.Fatal("lease still held after Complete")
	}
	if err := e.s.Complete(ctx, c, []byte("again")); !errors.Is(err, ErrNotClaimed) {
		t.Fatalf("second Complete = %v, want ErrNotClaimed", err)
	}
	d := e.claim(t, "order-1", fp("a"), Duplicate)
	want := Record{State: Completed, Fence: c.Fence, Fingerprint: fp("a"), Attempt: 1, Result: []byte("done")}
	if diff := cmp.Diff(want, *d.Record, cmpRecord); diff != "" {
		t.Fatalf("duplicate record (-want +got):\n%s", diff)
	}
	if d.Record.At.Before(before) || d.Record.At.After(time.Now().Add(2*time.Second)) {
		t.Fatalf("record time %v not near now", d.Record.At)
	}
	if d.Fence != c.Fence || d.Lease != nil || d.Err != nil || d.Record.Err("order-1") != nil {
		t.Fatalf("duplicate = %+v", d)
	}
	if ks, _ := e.c.Keys(ctx, e.prefix+"lease:*").Result(); len(ks) != 0 {
		t.Fatalf("lease keys left after Complete: %q", ks)
	}
}

// cmpRecord ignores the record time, checked separately.
// cmpRecord compares records but for their completion time and the history
// entry they carry (TestRecordLayoutMatchesLua and history_test.go check it).
var cmpRecord = cmp.Options{
	cmp.FilterPath(func(p cmp.Path) bool { return p.Last().String() == ".At" }, cmp.Ignore()),
	cmpopts.IgnoreUnexported(Record{}),
}

func TestHeld(t *testing.T) {
	t.Parallel()
	e := setup(t, nil)
	c := e.claim(t, "k", fp("a"), Acquired)
	h := e.claim(t, "k", fp("a"), Held)
	if h.Holder != leasing.Token(c.Lease) {
		t.Fatalf("holder %q, want the first claim's token", h.Holder)
	}
	if h.Remaining <= 0 || h.Remaining > e.m.TTL() {
		t.Fatalf("remaining %v, want within (0, %v]", h.Remaining, e.m.TTL())
	}
	if h.Lease != nil || h.Record != nil {
		t.Fatalf("held claim carries a lease or a record: %+v", h)
	}
	// A held claim cannot finish anything.
	if err := e.s.Complete(t.Context(), h, nil); !errors.Is(err, ErrNotClaimed) {
		t.Fatalf("Complete(held) = %v, want ErrNotClaimed", err)
	}
}

func TestConcurrentClaimsOneAcquires(t *testing.T) {
	t.Parallel()
	e := setup(t, nil)
	const n = 100
	var (
		wg     sync.WaitGroup
		start  = make(chan struct{})
		claims = make([]*Claim, n)
	)
	for i := range n {
		wg.Go(func() {
			<-start
			claims[i], _ = e.s.Claim(t.Context(), "contended", fp("p"))
		})
	}
	close(start)
	wg.Wait()
	got := map[Outcome]int{}
	for _, c := range claims {
		if c.Err != nil {
			t.Fatalf("claim error: %v", c.Err)
		}
		got[c.Outcome]++
	}
	if diff := cmp.Diff(map[Outcome]int{Acquired: 1, Held: n - 1}, got); diff != "" {
		t.Fatalf("outcomes (-want +got):\n%s", diff)
	}
}

func TestMismatch(t *testing.T) {
	t.Parallel()
	e := setup(t, nil)
	ctx := t.Context()
	// While the key is processing.
	c := e.claim(t, "k", fp("a"), Acquired)
	m := e.claim(t, "k", fp("b"), Mismatch)
	var me *MismatchError
	if !errors.As(m.Err, &me) || !errors.Is(m.Err, ErrMismatch) {
		t.Fatalf("mismatch error %v is not a *MismatchError", m.Err)
	}
	if me.Record.State != Processing || me.Record.Fingerprint != fp("a") || me.Got != fp("b") || me.Record.Fence != c.Fence {
		t.Fatalf("mismatch error carries %+v", me)
	}
	// After completion.
	if err := e.s.Complete(ctx, c, []byte("r")); err != nil {
		t.Fatal(err)
	}
	m = e.claim(t, "k", fp("b"), Mismatch)
	if m.Record.State != Completed || string(m.Record.Result) != "r" {
		t.Fatalf("mismatch record %+v", m.Record)
	}
	if !strings.Contains(m.Err.Error(), "fingerprint mismatch") {
		t.Fatalf("error text %q", m.Err)
	}
	e.claim(t, "k", fp("a"), Duplicate)
}

func TestFailTerminalReplays(t *testing.T) {
	t.Parallel()
	e := setup(t, nil)
	c := e.claim(t, "k", fp("a"), Acquired)
	if err := e.s.Fail(t.Context(), c, Terminal, errors.New("card declined")); err != nil {
		t.Fatalf("Fail: %v", err)
	}
	<-c.Lease.Done()
	for range 2 {
		d := e.claim(t, "k", fp("a"), Duplicate)
		if d.Record.State != Failed {
			t.Fatalf("state %v, want FAILED", d.Record.State)
		}
		var fe *FailedError
		if err := d.Record.Err("k"); !errors.As(err, &fe) || !errors.Is(err, ErrFailed) || fe.Message != "card declined" || fe.Fence != c.Fence {
			t.Fatalf("replayed error %v", err)
		}
	}
}

func TestFailRetryableKeepsAttemptAndDetails(t *testing.T) {
	t.Parallel()
	e := setup(t, nil)
	ctx := t.Context()
	c1 := e.claim(t, "k", fp("a"), Acquired)
	if err := e.s.SaveDetails(ctx, c1, []byte(`{"page":7}`)); err != nil {
		t.Fatalf("SaveDetails: %v", err)
	}
	if err := e.s.Fail(ctx, c1, Retryable, errors.New("timeout")); err != nil {
		t.Fatalf("Fail: %v", err)
	}
	c2 := e.claim(t, "k", fp("a"), Acquired)
	if c2.Attempt != 2 || c2.PrevFence != c1.Fence || c2.Fence <= c1.Fence || string(c2.Details) != `{"page":7}` {
		t.Fatalf("retry claim: attempt %d fence %d prev %d details %q (first fence %d)",
			c2.Attempt, c2.Fence, c2.PrevFence, c2.Details, c1.Fence)
	}
	if err := e.s.Complete(ctx, c2, nil); err != nil {
		t.Fatal(err)
	}
	if n, _ := e.c.Exists(ctx, e.s.detailsKey(c2.tag, "k")).Result(); n != 0 {
		t.Fatal("details left after Complete")
	}
	d := e.claim(t, "k", fp("a"), Duplicate)
	if d.Record.Attempt != 2 || d.Record.Fence != c2.Fence {
		t.Fatalf("record %+v", d.Record)
	}
}

func TestFailKeepHolds(t *testing.T) {
	t.Parallel()
	e := setup(t, []Opt{WithKeepHold(300 * time.Millisecond)})
	c1 := e.claim(t, "k", fp("a"), Acquired)
	if err := e.s.Fail(t.Context(), c1, Keep, errors.New("rate limited")); err != nil {
		t.Fatalf("Fail: %v", err)
	}
	h := e.claim(t, "k", fp("a"), Held)
	if h.Holder != "" || h.Remaining <= 0 || h.Remaining > 300*time.Millisecond {
		t.Fatalf("held by keep: holder %q remaining %v", h.Holder, h.Remaining)
	}
	time.Sleep(h.Remaining + 50*time.Millisecond)
	c2 := e.claim(t, "k", fp("a"), Acquired)
	if c2.Attempt != 2 || c2.Fence <= c1.Fence {
		t.Fatalf("after the hold: attempt %d fence %d", c2.Attempt, c2.Fence)
	}
}

func TestCrashThenTakeover(t *testing.T) {
	t.Parallel()
	c, prefix := testkit.SharedRedis(t)
	ttl := time.Second
	// The crashed worker: its Manager ends without releasing (as a killed
	// process would), so nothing renews the lease.
	a := setupOn(t, c, prefix, nil, lease.WithTTL(ttl), lease.WithLeaveOnShutdown(true))
	b := setupOn(t, c, prefix, nil, lease.WithTTL(ttl))
	c1 := a.claim(t, "job", fp("x"), Acquired)
	if err := a.s.SaveDetails(t.Context(), c1, []byte("step 3")); err != nil {
		t.Fatal(err)
	}
	if err := a.m.Shutdown(t.Context()); err != nil {
		t.Fatal(err)
	}
	b.claim(t, "job", fp("x"), Held)
	var c2 *Claim
	deadline := time.Now().Add(5 * ttl)
	for {
		c2, _ = b.s.Claim(t.Context(), "job", fp("x"))
		if c2.Outcome != Held || time.Now().After(deadline) {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	if c2.Outcome != Takeover {
		t.Fatalf("after the TTL: %v (%v), want takeover", c2.Outcome, c2.Err)
	}
	if c2.PrevFence != c1.Fence || c2.Fence <= c1.Fence || c2.Attempt != 2 || string(c2.Details) != "step 3" {
		t.Fatalf("takeover: fence %d prev %d attempt %d details %q; crashed fence %d",
			c2.Fence, c2.PrevFence, c2.Attempt, c2.Details, c1.Fence)
	}
	if err := b.s.Complete(t.Context(), c2, []byte("ok")); err != nil {
		t.Fatal(err)
	}
}

func TestZombieCompleteAfterTakeover(t *testing.T) {
	t.Parallel()
	c, prefix := testkit.SharedRedis(t)
	ctx := t.Context()
	// The zombie's Manager would renew only after 9s: its lease key is made to
	// vanish (as if it had expired during a stall) while it still believes
	// it holds it, so the fence check in Redis is what stops it.
	zombie := setupOn(t, c, prefix, nil, lease.WithTTL(10*time.Second), lease.WithRenewInterval(9*time.Second))
	owner := setupOn(t, c, prefix, nil)
	z := zombie.claim(t, "k", fp("a"), Acquired)
	if err := c.Del(ctx, zombie.m.Key(z.Lease.Name())).Err(); err != nil {
		t.Fatal(err)
	}
	n := owner.claim(t, "k", fp("a"), Takeover)
	if n.PrevFence != z.Fence {
		t.Fatalf("takeover prev fence %d, want %d", n.PrevFence, z.Fence)
	}
	if err := owner.s.Complete(ctx, n, []byte("new owner")); err != nil {
		t.Fatal(err)
	}
	err := zombie.s.Complete(ctx, z, []byte("zombie"))
	if !errors.Is(err, ErrLeaseLost) || !errors.Is(err, lease.ErrLost) {
		t.Fatalf("zombie Complete = %v, want ErrLeaseLost", err)
	}
	if err := zombie.s.SaveDetails(ctx, z, []byte("x")); !errors.Is(err, ErrNotClaimed) && !errors.Is(err, ErrLeaseLost) {
		t.Fatalf("zombie SaveDetails = %v", err)
	}
	d := owner.claim(t, "k", fp("a"), Duplicate)
	if string(d.Record.Result) != "new owner" || d.Record.Fence != n.Fence {
		t.Fatalf("record after the zombie: %q fence %d, want the new owner's (fence %d)", d.Record.Result, d.Record.Fence, n.Fence)
	}
	select {
	case <-z.Lease.Done():
		if !errors.Is(z.Lease.Err(), lease.ErrLost) {
			t.Fatalf("zombie lease ended with %v", z.Lease.Err())
		}
	case <-time.After(time.Second):
		t.Fatal("zombie lease not ended")
	}
}

// A zombie's completion while the new owner holds the key: the completion
// reads the lease with GETDEL, finds the owner's value and puts it back in
// the same script with the owner's TTL (from the value), so the owner's
// lease stands, its expiry no earlier than it was, and the owner completes.
// A value that is not a lease of that layout goes back with the retention
// as its TTL.
func TestZombieCompleteLeavesHoldersLease(t *testing.T) {
	t.Parallel()
	c, prefix := testkit.SharedRedis(t)
	ctx := t.Context()
	// Renewals every 50 s: neither Manager renews while the test reads TTLs.
	slow := []lease.Opt{lease.WithTTL(60 * time.Second), lease.WithRenewInterval(50 * time.Second)}
	zombie := setupOn(t, c, prefix, nil, slow...)
	owner := setupOn(t, c, prefix, nil, slow...)
	z := zombie.claim(t, "k", fp("a"), Acquired)
	key := zombie.m.Key(z.Lease.Name())
	if err := c.Del(ctx, key).Err(); err != nil {
		t.Fatal(err)
	}
	n := owner.claim(t, "k", fp("a"), Takeover)
	// An expiry shorter than the owner's TTL shows that the value goes back
	// with the TTL it names (60 s), not with none or a default.
	if err := c.PExpire(ctx, key, 20*time.Second).Err(); err != nil {
		t.Fatal(err)
	}
	before := c.Get(ctx, key).Val()
	if !strings.HasSuffix(before, " 60000") {
		t.Fatalf("the owner's lease value %q does not end with its TTL, 60000 ms", before)
	}
	if err := zombie.s.Complete(ctx, z, []byte("zombie")); !errors.Is(err, ErrLeaseLost) {
		t.Fatalf("zombie Complete = %v, want ErrLeaseLost", err)
	}
	after, err := c.Get(ctx, key).Result()
	if err != nil || after != before {
		t.Fatalf("the owner's lease after the zombie's completion: %q (%v), want %q", after, err, before)
	}
	if ttl := c.PTTL(ctx, key).Val(); ttl <= 20*time.Second || ttl > 60*time.Second {
		t.Fatalf("the owner's lease expires in %v after the zombie's completion, want in (20s, 60s]", ttl)
	}
	if err := owner.s.Complete(ctx, n, []byte("owner")); err != nil {
		t.Fatalf("the owner's Complete: %v", err)
	}
	if got := c.Exists(ctx, key).Val(); got != 0 {
		t.Fatalf("the owner's lease key is still there after its completion (%d)", got)
	}
	if d := owner.claim(t, "k", fp("a"), Duplicate); string(d.Record.Result) != "owner" {
		t.Fatalf("the record holds %q, want the owner's result", d.Record.Result)
	}

	g := zombie.claim(t, "g", fp("a"), Acquired)
	gkey := zombie.m.Key(g.Lease.Name())
	if err := c.Set(ctx, gkey, "not-a-lease", 20*time.Second).Err(); err != nil {
		t.Fatal(err)
	}
	if err := zombie.s.Complete(ctx, g, []byte("zombie")); !errors.Is(err, ErrLeaseLost) {
		t.Fatalf("Complete over a foreign value = %v, want ErrLeaseLost", err)
	}
	if v := c.Get(ctx, gkey).Val(); v != "not-a-lease" {
		t.Fatalf("the foreign value after the completion: %q", v)
	}
	if ttl := c.PTTL(ctx, gkey).Val(); ttl <= 20*time.Second || ttl > zombie.s.cfg.retention {
		t.Fatalf("the foreign value expires in %v, want in (20s, the retention %v]", ttl, zombie.s.cfg.retention)
	}
}

// A bucket's expiry is set by the claim that adds its mark (the field of
// empty name), and only by that one: a claim into a bucket that holds the
// mark sends no PEXPIREAT. A bucket without the mark (new, or deleted,
// evicted or lost and written again) gets its expiry from the next claim,
// whether the claim's record is new in the bucket or was already there (a
// retry).
func TestBucketMarkSetsExpiry(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	e := setup(t, []Opt{WithShards(1)}) // every key in one bucket a window
	expires := func(step, b string) {
		t.Helper()
		at, err := e.c.PExpireTime(ctx, b).Result()
		if err != nil || at <= 0 {
			t.Fatalf("%s: bucket %s expires at %v (%v), want an expiry", step, b, at, err)
		}
		mark, err := e.c.HGet(ctx, b, "").Result()
		if err != nil || mark != strconv.FormatInt(at.Milliseconds(), 10) {
			t.Fatalf("%s: bucket %s holds the mark %q (%v), want its expiry %d", step, b, mark, err, at.Milliseconds())
		}
	}

	// Two new keys claimed into one bucket, its expiry taken away between
	// them (a window may end between two claims: then two more).
	var a, b *Claim
	for i := 0; ; i++ {
		if i == 3 {
			t.Fatal("three pairs of claims each crossed a window's end")
		}
		a = e.claim(t, "a"+strconv.Itoa(i), fp("a"), Acquired)
		if err := e.c.Persist(ctx, a.keys.bucket).Err(); err != nil {
			t.Fatal(err)
		}
		b = e.claim(t, "b"+strconv.Itoa(i), fp("a"), Acquired)
		if b.keys.bucket == a.keys.bucket {
			break
		}
	}
	if ttl := e.c.PTTL(ctx, b.keys.bucket).Val(); ttl != -1 {
		t.Fatalf("a claim into a bucket that holds the mark changed its expiry: PTTL %v, want -1 (none, as the test left it)", ttl)
	}
	bucket := a.keys.bucket
	if err := e.c.HDel(ctx, bucket, "").Err(); err != nil {
		t.Fatal(err)
	}
	// (A window that ended meanwhile gives c a new bucket: one without the
	// mark too.)
	c := e.claim(t, "c", fp("a"), Acquired)
	expires("a new key's claim into a bucket without the mark", c.keys.bucket)

	// A retry: the released record is in the bucket, whose mark and expiry
	// are then taken away; the claim of the retry puts both back.
	if err := e.s.Fail(ctx, a, Retryable, errors.New("again")); err != nil {
		t.Fatal(err)
	}
	bucket = a.keys.bucket
	if err := e.c.HDel(ctx, bucket, "").Err(); err != nil {
		t.Fatal(err)
	}
	if err := e.c.Persist(ctx, bucket).Err(); err != nil {
		t.Fatal(err)
	}
	r := e.claim(t, a.Key, fp("a"), Acquired)
	if r.Attempt != 2 {
		t.Fatalf("the retry's attempt is %d, want 2", r.Attempt)
	}
	expires("a retry's claim into its record's bucket without the mark", r.keys.bucket)
}

func TestRetentionExpiryRunsAgain(t *testing.T) {
	t.Parallel()
	const retention = 2 * time.Second
	e := setup(t, []Opt{WithRetention(retention), WithWindows(2)})
	c1 := e.claim(t, "k", fp("a"), Acquired)
	if err := e.s.Complete(t.Context(), c1, []byte("r")); err != nil {
		t.Fatal(err)
	}
	done := time.Now()
	time.Sleep(retention / 2)
	e.claim(t, "k", fp("a"), Duplicate)
	// Kept at most retention + retention/windows.
	time.Sleep(time.Until(done.Add(retention + retention/2 + 200*time.Millisecond)))
	c2 := e.claim(t, "k", fp("b"), Acquired)
	if c2.Fence <= c1.Fence || c2.Attempt != 1 {
		t.Fatalf("after the retention: fence %d (was %d) attempt %d", c2.Fence, c1.Fence, c2.Attempt)
	}
}

func TestBoundsWriteNothing(t *testing.T) {
	t.Parallel()
	e := setup(t, []Opt{WithMaxKeyLen(16), WithMaxResult(10), WithMaxDetails(4)})
	ctx := t.Context()
	for _, k := range []string{"", strings.Repeat("k", 17), "a\nb", "tab\there", "del\x7f", "c1\u0085", "bad\xff"} {
		c, err := e.s.Claim(ctx, k, fp("a"))
		var ke *KeyError
		if !errors.As(err, &ke) || !errors.Is(err, ErrInvalidKey) || c.Outcome != 0 || c.Lease != nil {
			t.Errorf("Claim(%q) = %v, %v; want a *KeyError", k, c.Outcome, err)
		}
	}
	if ks := e.keys(t); len(ks) != 0 {
		t.Fatalf("invalid keys wrote %q", ks)
	}
	c := e.claim(t, strings.Repeat("k", 16), fp("a"), Acquired)
	var te *TooLargeError
	if err := e.s.Complete(ctx, c, make([]byte, 11)); !errors.As(err, &te) || te.Size != 11 || te.Limit != 10 {
		t.Fatalf("Complete(11 bytes) = %v, want a *TooLargeError", err)
	}
	if err := e.s.SaveDetails(ctx, c, []byte("12345")); !errors.Is(err, ErrTooLarge) {
		t.Fatalf("SaveDetails(5 bytes) = %v", err)
	}
	// Nothing was written: the key is still processing, and the claim can
	// still complete within the bound.
	e.claim(t, c.Key, fp("a"), Held)
	if err := e.s.Complete(ctx, c, make([]byte, 10)); err != nil {
		t.Fatalf("Complete(10 bytes): %v", err)
	}
}

func TestBatch(t *testing.T) {
	t.Parallel()
	e := setup(t, nil)
	ctx := t.Context()
	done := e.claim(t, "done", fp("d"), Acquired)
	if err := e.s.Complete(ctx, done, []byte("cached")); err != nil {
		t.Fatal(err)
	}
	e.claim(t, "busy", fp("b"), Acquired)
	reqs := []Request{{Key: "done", Fingerprint: fp("d")}, {Key: "busy", Fingerprint: fp("b")},
		{Key: "", Fingerprint: fp("x")}, {Key: "other", Fingerprint: fp("o")}}
	for i := range 50 {
		reqs = append(reqs, Request{Key: fmt.Sprintf("new-%d", i), Fingerprint: fp("n")})
	}
	cs := e.s.ClaimBatch(ctx, reqs)
	got := make([]Outcome, len(cs))
	want := []Outcome{Duplicate, Held, 0, Acquired}
	var comps []Completion
	for i, c := range cs {
		got[i] = c.Outcome
		if i >= 4 {
			want = append(want, Acquired)
		}
		if c.Outcome == Acquired {
			comps = append(comps, Completion{Claim: c, Result: []byte(c.Key)})
		}
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Fatalf("batch outcomes (-want +got):\n%s", diff)
	}
	if !errors.Is(cs[2].Err, ErrInvalidKey) {
		t.Fatalf("empty key in a batch: %v", cs[2].Err)
	}
	for i, err := range e.s.CompleteBatch(ctx, comps) {
		if err != nil {
			t.Fatalf("CompleteBatch[%d]: %v", i, err)
		}
	}
	again := e.s.ClaimBatch(ctx, reqs[3:])
	for _, c := range again {
		if c.Outcome != Duplicate || string(c.Record.Result) != c.Key {
			t.Fatalf("after CompleteBatch, %q: %v %q", c.Key, c.Outcome, c.Record.Result)
		}
	}
}

// TestLargeResultKeepsBucketsCompact: without a history (a record then
// carries no history entry, see History), records stay small enough for
// Redis to keep the buckets as listpacks, a large result going to its own key.
func TestLargeResultKeepsBucketsCompact(t *testing.T) {
	t.Parallel()
	e := setup(t, []Opt{WithShards(1), WithHistory(0)})
	ctx := t.Context()
	big := []byte(strings.Repeat("r", 5000))
	for i, res := range [][]byte{big, []byte("small"), nil} {
		k := fmt.Sprintf("k%d", i)
		c := e.claim(t, k, fp("a"), Acquired)
		if err := e.s.Complete(ctx, c, res); err != nil {
			t.Fatal(err)
		}
		d := e.claim(t, k, fp("a"), Duplicate)
		if !cmp.Equal(string(d.Record.Result), string(res)) {
			t.Fatalf("%s: replayed %d bytes, want %d", k, len(d.Record.Result), len(res))
		}
	}
	buckets, _ := e.c.Keys(ctx, e.prefix+"idem:b:*").Result()
	if len(buckets) == 0 {
		t.Fatal("no bucket")
	}
	for _, b := range buckets {
		if enc, _ := e.c.ObjectEncoding(ctx, b).Result(); enc != "listpack" {
			t.Fatalf("bucket %s encoding %q, want listpack", b, enc)
		}
	}
}

func TestCompleteAfterLocalLoss(t *testing.T) {
	t.Parallel()
	e := setup(t, nil, lease.WithTTL(time.Second))
	c := e.claim(t, "k", fp("a"), Acquired)
	lost := make(chan error, 1)
	c.Lease.OnLost(func(err error) { lost <- err })
	if err := e.c.Del(t.Context(), e.m.Key(c.Lease.Name())).Err(); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-lost:
		if !errors.Is(err, lease.ErrLost) {
			t.Fatalf("OnLost cause = %v, want lease.ErrLost", err)
		}
	case <-time.After(3 * time.Second):
		t.Fatal("renewer did not notice the lost lease")
	}
	if err := e.s.Complete(t.Context(), c, nil); !errors.Is(err, ErrLeaseLost) {
		t.Fatalf("Complete after loss = %v, want ErrLeaseLost", err)
	}
	e.claim(t, "k", fp("a"), Takeover)
}

func TestCompleteDoesNotFireOnLost(t *testing.T) {
	t.Parallel()
	e := setup(t, nil, lease.WithTTL(600*time.Millisecond))
	c := e.claim(t, "k", fp("a"), Acquired)
	lost := make(chan error, 1)
	c.Lease.OnLost(func(err error) { lost <- err })
	if err := e.s.Complete(t.Context(), c, nil); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-lost:
		t.Fatalf("OnLost ran after a successful Complete: %v", err)
	case <-time.After(time.Second):
	}
	if got := len(e.m.Held()); got != 0 {
		t.Fatalf("Manager still holds %d leases", got)
	}
}

// TestWindowEdges runs claims across many window edges (62.5ms windows): a
// record moves to the window of its completion and is found right after.
func TestWindowEdges(t *testing.T) {
	t.Parallel()
	e := setup(t, []Opt{WithRetention(time.Second), WithWindows(16), WithShards(4)})
	ctx := t.Context()
	for i := range 40 {
		k := fmt.Sprintf("k%d", i)
		c := e.claim(t, k, fp("a"), Acquired)
		time.Sleep(time.Duration(i%4) * 15 * time.Millisecond)
		if err := e.s.Complete(ctx, c, []byte(k)); err != nil {
			t.Fatalf("Complete %s: %v", k, err)
		}
		d := e.claim(t, k, fp("a"), Duplicate)
		if string(d.Record.Result) != k {
			t.Fatalf("%s replayed %q", k, d.Record.Result)
		}
	}
}

func TestRepeatedKeyInOneBatch(t *testing.T) {
	t.Parallel()
	e := setup(t, nil)
	cs := e.s.ClaimBatch(t.Context(), []Request{{Key: "same", Fingerprint: fp("a")}, {Key: "same", Fingerprint: fp("a")}})
	if cs[0].Outcome != Acquired || cs[1].Outcome != Held || cs[1].Holder != leasing.Token(cs[0].Lease) {
		t.Fatalf("repeated key: %v then %v", cs[0].Outcome, cs[1].Outcome)
	}
}

func TestTerminalErrorTextIsBoundedAndMarked(t *testing.T) {
	t.Parallel()
	e := setup(t, []Opt{WithMaxResult(32)})
	c := e.claim(t, "k", fp("a"), Acquired)
	if err := e.s.Fail(t.Context(), c, Terminal, errors.New(strings.Repeat("x", 100))); err != nil {
		t.Fatal(err)
	}
	d := e.claim(t, "k", fp("a"), Duplicate)
	msg := string(d.Record.Result)
	if len(msg) != 32 || !strings.HasSuffix(msg, "...(cut)") {
		t.Fatalf("stored error text %q (%d bytes), want 32 bytes ending with the cut mark", msg, len(msg))
	}
	if err := e.s.Fail(t.Context(), d, Retryable, nil); !errors.Is(err, ErrNotClaimed) {
		t.Fatalf("Fail on a duplicate = %v, want ErrNotClaimed", err)
	}
	if err := e.s.Fail(t.Context(), c, Policy(9), nil); err == nil {
		t.Fatal("unknown policy accepted")
	}
}

// A lease key left in the layout of a leasehold from before lease keys
// became strings (a hash) makes the claim fail, nothing written, with an
// error that names the cause; once the old key is gone the key claims.
func TestClaimOldLeaseLayoutNamed(t *testing.T) {
	t.Parallel()
	e := setup(t, nil)
	ctx := t.Context()
	leaseKey := e.m.Key(e.s.LeaseName("old"))
	if err := e.c.HSet(ctx, leaseKey, "tok", "old-worker", "fen", "1").Err(); err != nil {
		t.Fatal(err)
	}
	_, err := e.s.Claim(ctx, "old", fp("a"))
	if err == nil || !strings.Contains(err.Error(), "WRONGTYPE") || !strings.Contains(err.Error(), "before lease keys became strings") {
		t.Fatalf("Claim over an old-layout lease key: %v, want WRONGTYPE with its cause named", err)
	}
	if errors.Is(err, ErrUnavailable) {
		t.Fatalf("Claim over an old-layout lease key: %v, read as an outage", err)
	}
	if info, lerr := e.s.Lookup(ctx, "old"); lerr != nil || info.State != Absent {
		t.Fatalf("after the refused claim: %+v, %v; want no record", info, lerr)
	}
	if err := e.c.Del(ctx, leaseKey).Err(); err != nil {
		t.Fatal(err)
	}
	e.claim(t, "old", fp("a"), Acquired)
}

// A claim builds its lease key in the one string of its other keys when the
// Manager is over the Redis backend (leasing.TaggedKeyPrefix), and asks the
// Manager otherwise (here a backend that wraps it): either way the key it
// sends is the Manager's key of its lease, and completing the claim deletes
// that key.
func TestClaimLeaseKeyIsManagers(t *testing.T) {
	t.Parallel()
	c, prefix := testkit.SharedRedis(t)
	wrapped, err := lease.NewManagerWithBackend(struct{ lease.Backend }{lease.NewRedisBackend(c, prefix+"w:")},
		lease.WithTTL(2*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	if err := wrapped.Start(t.Context()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = wrapped.Shutdown(context.Background()) })
	ws, err := New(t.Context(), c, wrapped, WithPrefix(prefix+"w:"))
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name  string
		e     *env
		built bool
	}{
		{"redis backend", setupOn(t, c, prefix, nil), true},
		{"wrapped backend", &env{s: ws, m: wrapped, c: c, prefix: prefix + "w:"}, false},
	} {
		if p := leasing.TaggedKeyPrefix(tc.e.m); (p != "") != tc.built {
			t.Fatalf("%s: TaggedKeyPrefix = %q, want a prefix: %v", tc.name, p, tc.built)
		}
		cl := tc.e.claim(t, "order/7", fp("a"), Acquired)
		want := tc.e.m.Key(cl.Lease.Name())
		if cl.keys.lease != want {
			t.Fatalf("%s: claim's lease key %q, the Manager's %q", tc.name, cl.keys.lease, want)
		}
		if n, _ := c.Exists(t.Context(), want).Result(); n != 1 {
			t.Fatalf("%s: lease key %q not in Redis after the claim", tc.name, want)
		}
		if err := tc.e.s.Complete(t.Context(), cl, []byte("r")); err != nil {
			t.Fatalf("%s: Complete: %v", tc.name, err)
		}
		if n, _ := c.Exists(t.Context(), want).Result(); n != 0 {
			t.Errorf("%s: lease key %q left in Redis after the completion", tc.name, want)
		}
	}
}

// A claim reply that is a string but not an acquired or takeover answer
// (idem_claim.lua's packed layout) is refused as corrupt, and nothing is
// adopted: too short, another code, an unknown details flag, or bytes past
// the fixed part without the details flag.
func TestParseRunningRefusesMalformed(t *testing.T) {
	t.Parallel()
	ok := "\x01" + strings.Repeat("\x00", runningLen-1)
	for name, res := range map[string]string{
		"empty":           "",
		"short":           ok[:runningLen-1],
		"held code":       "\x03" + ok[1:],
		"details flag 2":  ok[:runningLen-1] + "\x02",
		"trailing bytes":  ok + "x",
		"details no flag": ok[:runningLen-1] + "\x00details",
	} {
		c := &Claim{Key: "k"}
		(&Store{}).parseRunning(t.Context(), c, res, "token", time.Now())
		if !errors.Is(c.Err, ErrCorrupt) || c.Lease != nil || c.Outcome != 0 {
			t.Errorf("%s: err %v, lease %v, outcome %v; want ErrCorrupt and nothing adopted", name, c.Err, c.Lease, c.Outcome)
		}
	}
}

// uint56 reads struct's I7 as the scripts pack it.
func TestUint56(t *testing.T) {
	t.Parallel()
	if got := uint56("\x1f\xff\xff\xff\xff\xff\xff"); got != 1<<53-1 {
		t.Errorf("uint56(2^53-1) = %d", got)
	}
	if got := uint56([]byte{0, 0, 0, 0, 0, 1, 2, 99}); got != 258 {
		t.Errorf("uint56 read %d, want 258 (the first 7 bytes only)", got)
	}
}
