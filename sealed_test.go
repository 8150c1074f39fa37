package leasehold

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/leasehold/leasehold/compensation"
	"github.com/leasehold/leasehold/idempotency"
	"github.com/leasehold/leasehold/internal/testkit"
)

// sealedStore builds the worker's Redis side (lease manager, idempotency
// store and, with reg, the compensation runner) over rdb as Worker.Start
// does, without Kafka. The runner's periodic sweep is pushed out of the
// way: tests drive Runner.Sweep themselves.
func sealedStore(t *testing.T, rdb redis.UniversalClient, prefix string, reg *compensation.Registry, opts ...Opt) *redisStore {
	t.Helper()
	base := []Opt{WithKeyPrefix(prefix), WithLeaseTTL(time.Second)}
	if reg != nil {
		base = append(base, WithCompensation(reg, compensation.WithSweepInterval(time.Hour),
			compensation.WithBackoff(5*time.Millisecond, 50*time.Millisecond)))
	}
	w, err := New(rdb, append(base, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	rs, closeFn, err := newRedisStore(t.Context(), rdb, &w.cfg)
	if err != nil {
		t.Fatalf("newRedisStore: %v", err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := closeFn(ctx); err != nil {
			t.Errorf("store shutdown: %v", err)
		}
	})
	return rs
}

// refundRegistry registers test.refund, which counts refunds per key in led.
func refundRegistry(t *testing.T, led *ledger) *compensation.Registry {
	t.Helper()
	reg := compensation.NewRegistry()
	if err := compensation.Register(reg, "test.refund", func(_ context.Context, a refundArgs) error {
		led.refund(a.Key)
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	return reg
}

// sealedAttempt claims k, charges it in one saga step (refunded by
// test.refund) and seals the attempt's journal, as runJob does right before
// its fenced commit. The caller then plays what happened to the commit.
func sealedAttempt(t *testing.T, rs *redisStore, r *compensation.Runner, led *ledger, k string) (*idempotency.Claim, *compensation.Journal) {
	t.Helper()
	ctx := t.Context()
	fp, err := rs.s.Fingerprint([]byte("payload of " + k))
	if err != nil {
		t.Fatal(err)
	}
	c, err := rs.s.Claim(ctx, k, fp)
	if err != nil || (c.Outcome != idempotency.Acquired && c.Outcome != idempotency.Takeover) {
		t.Fatalf("claim %s: %v, %v", k, c.Outcome, err)
	}
	j := r.Journal(c.Lease)
	if err := j.Step(ctx, "charge", func(context.Context) error { led.charge(k); return nil },
		"test.refund", refundArgs{Key: k}); err != nil {
		t.Fatalf("step of %s: %v", k, err)
	}
	if err := j.Seal(ctx); err != nil {
		t.Fatalf("seal of %s: %v", k, err)
	}
	return c, j
}

func wantState(t *testing.T, r *compensation.Runner, j *compensation.Journal, want compensation.State) {
	t.Helper()
	info, err := r.Inspect(t.Context(), j.Ref())
	if err != nil || info.State != want {
		t.Errorf("journal %s: state %q (%v), want %q", j.Ref(), info.State, err, want)
	}
}

// TestSagaSealedJournalCommitted: the owner sealed its journal, committed,
// and died before closing the journal. The sweep finds the key's record
// COMPLETED under the journal's fence, closes the journal and refunds
// nothing.
func TestSagaSealedJournalCommitted(t *testing.T) {
	t.Parallel()
	rdb, prefix := testkit.SharedRedis(t)
	led := &ledger{charged: map[string]int{}, refunds: map[string]int{}}
	rs := sealedStore(t, rdb, prefix, refundRegistry(t, led))
	ctx := t.Context()

	c, j := sealedAttempt(t, rs, rs.comp, led, "sealed-committed")
	if err := rs.s.Complete(ctx, c, []byte("ok")); err != nil {
		t.Fatalf("complete: %v", err)
	}
	rep, err := rs.comp.Sweep(ctx)
	if err != nil || rep.Committed != 1 || rep.Compensated != 0 || rep.Sealed != 0 {
		t.Fatalf("sweep: %+v, %v; want the journal found committed", rep, err)
	}
	wantState(t, rs.comp, j, compensation.StateCommitted)
	if charged, refunded := led.net("sealed-committed"); charged != 1 || refunded != 0 {
		t.Errorf("%d charges, %d refunds; want the committed charge to stand", charged, refunded)
	}
}

// TestSagaSealedJournalCommitMissing: sealed journals whose commit did not
// land, each found by the sweep and compensated once: the key taken over
// under a newer fence (still PROCESSING), the attempt's failure recorded
// instead of its commit (released, or FAILED terminally), and no record at
// all.
func TestSagaSealedJournalCommitMissing(t *testing.T) {
	t.Parallel()
	rdb, prefix := testkit.SharedRedis(t)
	led := &ledger{charged: map[string]int{}, refunds: map[string]int{}}
	rs := sealedStore(t, rdb, prefix, refundRegistry(t, led))
	ctx := t.Context()
	journals := map[string]*compensation.Journal{}

	// Taken over: the owner's lease expired after the seal; a newer
	// attempt holds the key.
	c, j := sealedAttempt(t, rs, rs.comp, led, "sealed-takeover")
	journals["sealed-takeover"] = j
	leaseKey := rs.m.Key(rs.s.LeaseName("sealed-takeover"))
	// Deleted, not given a 1 ms TTL, which a renewal within that millisecond
	// would undo.
	if err := rdb.Del(ctx, leaseKey).Err(); err != nil {
		t.Fatal(err)
	}
	testkit.Eventually(t, 5*time.Second, "the owner's lease gone", func() bool { return rdb.Exists(ctx, leaseKey).Val() == 0 })
	fp, _ := rs.s.Fingerprint([]byte("payload of sealed-takeover"))
	next, err := rs.s.Claim(ctx, "sealed-takeover", fp)
	if err != nil || next.Outcome != idempotency.Takeover || next.Fence <= c.Fence {
		t.Fatalf("takeover claim: %v fence %d (previous %d), %v", next.Outcome, next.Fence, c.Fence, err)
	}

	// The attempt's failure was recorded instead of its commit.
	c, j = sealedAttempt(t, rs, rs.comp, led, "sealed-released")
	journals["sealed-released"] = j
	if err := rs.s.Fail(ctx, c, idempotency.Retryable, errors.New("commit refused")); err != nil {
		t.Fatal(err)
	}
	c, j = sealedAttempt(t, rs, rs.comp, led, "sealed-failed")
	journals["sealed-failed"] = j
	if err := rs.s.Fail(ctx, c, idempotency.Terminal, errors.New("commit refused")); err != nil {
		t.Fatal(err)
	}

	// No record: a lease taken under the key's name without a claim.
	l, err := rs.m.Acquire(ctx, rs.s.LeaseName("sealed-absent"))
	if err != nil {
		t.Fatal(err)
	}
	j = rs.comp.Journal(l)
	if err := j.Step(ctx, "charge", func(context.Context) error { led.charge("sealed-absent"); return nil },
		"test.refund", refundArgs{Key: "sealed-absent"}); err != nil {
		t.Fatal(err)
	}
	if err := j.Seal(ctx); err != nil {
		t.Fatal(err)
	}
	if err := l.Release(ctx); err != nil {
		t.Fatal(err)
	}
	journals["sealed-absent"] = j

	rep, err := rs.comp.Sweep(ctx)
	if err != nil || rep.Compensated != len(journals) || rep.Committed != 0 || rep.Sealed != 0 {
		t.Fatalf("sweep: %+v, %v; want %d journals compensated", rep, err, len(journals))
	}
	if rep, err = rs.comp.Sweep(ctx); err != nil || rep.Compensated != 0 {
		t.Fatalf("second sweep: %+v, %v; want nothing left to compensate", rep, err)
	}
	for k, j := range journals {
		wantState(t, rs.comp, j, compensation.StateCompensated)
		if charged, refunded := led.net(k); charged != 1 || refunded != 1 {
			t.Errorf("%s: %d charges, %d refunds; want the charge refunded once", k, charged, refunded)
		}
	}
}

// TestSagaSealedJournalPastRetention: a sealed journal whose attempt is older
// than the idempotency retention (a crash before an outage longer than it)
// has no record left to tell whether it committed. The sweep leaves it
// sealed rather than refunding a charge that may stand.
func TestSagaSealedJournalPastRetention(t *testing.T) {
	t.Parallel()
	rdb, prefix := testkit.SharedRedis(t)
	led := &ledger{charged: map[string]int{}, refunds: map[string]int{}}
	rs := sealedStore(t, rdb, prefix, refundRegistry(t, led), WithRetention(2*time.Second))
	ctx := t.Context()

	c, j := sealedAttempt(t, rs, rs.comp, led, "sealed-old")
	if err := rs.s.Complete(ctx, c, []byte("ok")); err != nil {
		t.Fatalf("complete: %v", err)
	}
	testkit.Eventually(t, 10*time.Second, "the completed record expired", func() bool {
		info, err := rs.s.Lookup(ctx, "sealed-old")
		return err == nil && info.State == idempotency.Absent
	})
	rep, err := rs.comp.Sweep(ctx)
	if err != nil || rep.Sealed != 1 || rep.Compensated != 0 || rep.Committed != 0 || rep.Failed != 0 {
		t.Fatalf("sweep: %+v, %v; want the journal left sealed", rep, err)
	}
	wantState(t, rs.comp, j, compensation.StateSealed)
	if charged, refunded := led.net("sealed-old"); charged != 1 || refunded != 0 {
		t.Errorf("%d charges, %d refunds; want the charge left alone", charged, refunded)
	}
}

// TestSagaSealedJournalLookupFails: while the commit check cannot reach
// Redis (its client is cut off by a proxy; the sweep's own client is not),
// a committed sealed journal is left as it is and the sweep reports the
// failure; once Redis answers again, the next sweep closes it.
func TestSagaSealedJournalLookupFails(t *testing.T) {
	t.Parallel()
	rdb, prefix := testkit.SharedRedis(t)
	led := &ledger{charged: map[string]int{}, refunds: map[string]int{}}
	rs := sealedStore(t, rdb, prefix, nil)
	proxy := testkit.StartProxy(t, rdb.Options().Addr)
	cut := redis.NewClient(&redis.Options{Addr: proxy.Addr(), DB: rdb.Options().DB})
	t.Cleanup(func() { _ = cut.Close() })
	checker := sealedStore(t, cut, prefix, nil)
	r, err := compensation.NewRunner(rdb, rs.m, refundRegistry(t, led), compensation.WithPrefix(prefix),
		compensation.WithCommitted(checker.commitLanded))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := r.Shutdown(ctx); err != nil {
			t.Errorf("runner shutdown: %v", err)
		}
	})
	ctx := t.Context()

	c, j := sealedAttempt(t, rs, r, led, "sealed-unknown")
	if err := rs.s.Complete(ctx, c, []byte("ok")); err != nil {
		t.Fatalf("complete: %v", err)
	}
	proxy.Block()
	rep, err := r.Sweep(ctx)
	if !errors.Is(err, idempotency.ErrUnavailable) || rep.Failed != 1 || rep.Committed != 0 || rep.Compensated != 0 {
		t.Fatalf("sweep with the check cut off: %+v, %v; want one failure wrapping idempotency.ErrUnavailable", rep, err)
	}
	wantState(t, r, j, compensation.StateSealed)

	proxy.Unblock()
	rep, err = r.Sweep(ctx)
	if err != nil || rep.Committed != 1 || rep.Compensated != 0 {
		t.Fatalf("sweep after Redis came back: %+v, %v; want the journal found committed", rep, err)
	}
	wantState(t, r, j, compensation.StateCommitted)
	if charged, refunded := led.net("sealed-unknown"); charged != 1 || refunded != 0 {
		t.Errorf("%d charges, %d refunds; want the committed charge to stand", charged, refunded)
	}
}
