package idempotency

import (
	"errors"
	"testing"
	"time"

	"github.com/leasehold/leasehold/internal/testkit"
	"github.com/leasehold/leasehold/lease"
)

// pttl returns the Redis PTTL of key k's lease.
func (e *env) pttl(t *testing.T, k string) time.Duration {
	t.Helper()
	d, err := e.c.PTTL(t.Context(), e.m.Key(e.s.LeaseName(k))).Result()
	if err != nil {
		t.Fatal(err)
	}
	return d
}

// Two keys claimed in one batch with their own TTLs get leases with those
// TTLs in Redis, and the renewer keeps each alive with its own TTL, past it,
// while they are held: neither falls back to the Manager's TTL.
func TestPerKeyTTLInOneBatch(t *testing.T) {
	t.Parallel()
	const (
		storeTTL = time.Second
		short    = 500 * time.Millisecond
		long     = 2500 * time.Millisecond
	)
	e := setup(t, nil, lease.WithTTL(storeTTL), lease.WithRenewInterval(150*time.Millisecond))
	cs := e.s.ClaimBatch(t.Context(), []Request{
		{Key: "short", Fingerprint: fp("a"), TTL: short},
		{Key: "long", Fingerprint: fp("a"), TTL: long},
		{Key: "default", Fingerprint: fp("a")},
	})
	for i, want := range []time.Duration{short, long, storeTTL} {
		c := cs[i]
		if c.Outcome != Acquired || c.Err != nil {
			t.Fatalf("claim %s = %v (%v), want acquired", c.Key, c.Outcome, c.Err)
		}
		if got := c.Lease.TTL(); got != want {
			t.Errorf("lease of %s: TTL %s, want %s", c.Key, got, want)
		}
	}
	within := func(k string, lo, hi time.Duration) {
		t.Helper()
		if d := e.pttl(t, k); d <= lo || d > hi {
			t.Fatalf("PTTL of %s's lease = %s, want within (%s, %s]", k, d, lo, hi)
		}
	}
	// Sampled until well past the long TTL: each renewal sets the key's own
	// TTL (a short lease renewed with the Manager's TTL would read above
	// 500ms, a long one below 1s).
	start := time.Now()
	for time.Since(start) < long+500*time.Millisecond {
		within("short", 0, short)
		within("long", storeTTL, long)
		within("default", 0, storeTTL)
		time.Sleep(100 * time.Millisecond)
	}
	for _, c := range cs {
		if err := c.Lease.Err(); err != nil {
			t.Fatalf("lease of %s lost while held: %v", c.Key, err)
		}
	}
	// Another claimer sees each key held for at most its own TTL.
	other := setupOn(t, e.c, e.prefix, nil, lease.WithTTL(storeTTL))
	for _, k := range []struct {
		key string
		ttl time.Duration
	}{{"short", short}, {"long", long}} {
		h := other.claim(t, k.key, fp("a"), Held)
		if h.Remaining <= 0 || h.Remaining > k.ttl {
			t.Errorf("%s held for %s more, want within (0, %s]", k.key, h.Remaining, k.ttl)
		}
	}
	for _, c := range cs {
		if err := e.s.Complete(t.Context(), c, []byte("ok")); err != nil {
			t.Fatalf("Complete %s: %v", c.Key, err)
		}
	}
}

// A key whose owner crashed (its Manager ends without releasing) is taken
// over once its own short TTL has passed, long before the stores' TTL; a
// Keep failure holds a key for its own TTL too.
func TestPerKeyTTLTakeoverAndHold(t *testing.T) {
	t.Parallel()
	c, prefix := testkit.SharedRedis(t)
	const (
		storeTTL = 10 * time.Second
		// Long enough that a loaded machine still sees the key held right
		// after the crash, far below the stores' TTL.
		short = 1500 * time.Millisecond
	)
	opts := []lease.Opt{lease.WithTTL(storeTTL), lease.WithRenewInterval(150 * time.Millisecond)}
	a := setupOn(t, c, prefix, nil, append(opts, lease.WithLeaveOnShutdown(true))...)
	b := setupOn(t, c, prefix, nil, opts...)

	c1 := a.s.ClaimBatch(t.Context(), []Request{{Key: "crashed", Fingerprint: fp("x"), TTL: short}})[0]
	if c1.Outcome != Acquired || c1.Err != nil {
		t.Fatalf("claim = %v (%v)", c1.Outcome, c1.Err)
	}
	// Wait until the renewer has renewed the lease (its PTTL goes up), and
	// check that it renewed it for the key's TTL, not the store's.
	key := a.m.Key(c1.Lease.Name())
	pttl := func() time.Duration {
		ttl, err := c.PTTL(t.Context(), key).Result()
		if err != nil {
			t.Fatalf("PTTL %s: %v", key, err)
		}
		return ttl
	}
	last := pttl()
	for end := time.Now().Add(5 * time.Second); ; {
		ttl := pttl()
		if ttl > last {
			if ttl > short {
				t.Fatalf("renewed for %s, want at most the key's TTL %s", ttl, short)
			}
			break
		}
		if time.Now().After(end) {
			t.Fatalf("the lease was not renewed within 5s (PTTL %s)", ttl)
		}
		last = ttl
		time.Sleep(10 * time.Millisecond)
	}
	if err := a.m.Shutdown(t.Context()); err != nil {
		t.Fatal(err)
	}
	crashed := time.Now()
	h := b.claim(t, "crashed", fp("x"), Held)
	if h.Remaining > short {
		t.Fatalf("held for %s more after the crash, want at most the key's TTL %s", h.Remaining, short)
	}
	var (
		c2  *Claim
		err error
	)
	for {
		c2, err = b.s.Claim(t.Context(), "crashed", fp("x"))
		if c2.Outcome != Held || time.Since(crashed) > storeTTL {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	took := time.Since(crashed)
	if c2.Outcome != Takeover || err != nil {
		t.Fatalf("after the key's TTL: %v (%v), want takeover", c2.Outcome, err)
	}
	if took > short+time.Second {
		t.Fatalf("taken over %s after the crash; the key's TTL is %s (the stores' %s)", took, short, storeTTL)
	}
	if c2.PrevFence != c1.Fence || c2.Lease.TTL() != storeTTL {
		t.Fatalf("takeover: prev fence %d (want %d), lease TTL %s (a claim without TTL gets the store's %s)",
			c2.PrevFence, c1.Fence, c2.Lease.TTL(), storeTTL)
	}

	// Keep holds the key for the claim's TTL, not the store's.
	k1 := b.s.ClaimBatch(t.Context(), []Request{{Key: "kept", Fingerprint: fp("y"), TTL: short}})[0]
	if k1.Outcome != Acquired {
		t.Fatalf("claim kept = %v (%v)", k1.Outcome, k1.Err)
	}
	if err := b.s.Fail(t.Context(), k1, Keep, errors.New("later")); err != nil {
		t.Fatal(err)
	}
	kh := b.claim(t, "kept", fp("y"), Held)
	if kh.Holder != "" || kh.Remaining <= 0 || kh.Remaining > short {
		t.Fatalf("kept: holder %q, held for %s more; want a hold of at most %s", kh.Holder, kh.Remaining, short)
	}
	time.Sleep(kh.Remaining + 50*time.Millisecond)
	b.claim(t, "kept", fp("y"), Acquired)
}

// A TTL the Manager cannot renew in time (not longer than its renew interval
// plus the drift margin) or a negative one is refused for that key alone,
// with nothing written for it.
func TestPerKeyTTLRefused(t *testing.T) {
	t.Parallel()
	e := setup(t, nil, lease.WithTTL(3*time.Second), lease.WithRenewInterval(time.Second))
	cs := e.s.ClaimBatch(t.Context(), []Request{
		{Key: "too-short", Fingerprint: fp("a"), TTL: time.Second},
		{Key: "negative", Fingerprint: fp("a"), TTL: -time.Second},
		{Key: "fine", Fingerprint: fp("a"), TTL: 2 * time.Second},
	})
	for _, c := range cs[:2] {
		if !errors.Is(c.Err, ErrInvalidTTL) || c.Outcome != 0 || c.Lease != nil {
			t.Errorf("claim %s = %v, %v; want ErrInvalidTTL and no lease", c.Key, c.Outcome, c.Err)
		}
	}
	if !errors.Is(cs[0].Err, lease.ErrInvalid) {
		t.Errorf("too short: %v does not match lease.ErrInvalid", cs[0].Err)
	}
	if cs[2].Outcome != Acquired || cs[2].Lease.TTL() != 2*time.Second {
		t.Fatalf("the valid claim of the batch = %v (%v)", cs[2].Outcome, cs[2].Err)
	}
	for _, k := range []string{"too-short", "negative"} {
		if n, err := e.c.Exists(t.Context(), e.m.Key(e.s.LeaseName(k))).Result(); err != nil || n != 0 {
			t.Errorf("%s: lease key exists (%d, %v) for a refused claim", k, n, err)
		}
		info, err := e.s.Lookup(t.Context(), k)
		if err != nil {
			t.Fatal(err)
		}
		if info.State != Absent || info.Leased {
			t.Errorf("%s: state %v, leased %v after a refused claim; want nothing written", k, info.State, info.Leased)
		}
	}
}
