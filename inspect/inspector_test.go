package inspect_test

import (
	"context"
	"errors"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"go.uber.org/goleak"

	"github.com/leasehold/leasehold/compensation"
	"github.com/leasehold/leasehold/idempotency"
	"github.com/leasehold/leasehold/inspect"
	"github.com/leasehold/leasehold/internal/testkit"
	"github.com/leasehold/leasehold/lease"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// env is one test's worker side (a lease manager, a store and a
// compensation runner) and an Inspector, on the shared Redis under a fresh
// prefix.
type env struct {
	rdb    *redis.Client
	prefix string
	m      *lease.Manager
	s      *idempotency.Store
	comp   *compensation.Runner
	reg    *compensation.Registry
	in     *inspect.Inspector
}

func setup(t *testing.T) *env {
	t.Helper()
	c, prefix := testkit.SharedRedis(t)
	m, err := lease.NewManager(c, lease.WithPrefix(prefix), lease.WithTTL(2*time.Second))
	must(t, err)
	must(t, m.Start(t.Context()))
	s, err := idempotency.New(t.Context(), c, m, idempotency.WithPrefix(prefix))
	must(t, err)
	reg := compensation.NewRegistry()
	comp, err := compensation.NewRunner(c, m, reg, compensation.WithPrefix(prefix))
	must(t, err)
	in := inspect.New(c, inspect.WithPrefix(prefix), inspect.WithCompensations(reg))
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = in.Close(ctx)
		_ = comp.Shutdown(ctx)
		_ = m.Shutdown(ctx)
	})
	return &env{rdb: c, prefix: prefix, m: m, s: s, comp: comp, reg: reg, in: in}
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

func (e *env) claim(t *testing.T, k string, want idempotency.Outcome) *idempotency.Claim {
	t.Helper()
	f, _ := idempotency.PayloadFingerprint([]byte("p"))
	c, err := e.s.Claim(t.Context(), k, f)
	if err != nil || c.Outcome != want {
		t.Fatalf("Claim(%q) = %v (err %v), want %v", k, c.Outcome, err, want)
	}
	return c
}

// TestKeyReadsRecordLeaseDetails: Key shows a running key's lease (owner
// digest, fence, time left) and heartbeat details, then its completed
// record with the result.
func TestKeyReadsRecordLeaseDetails(t *testing.T) {
	t.Parallel()
	e := setup(t)
	ctx := t.Context()
	c := e.claim(t, "k1", idempotency.Acquired)
	must(t, e.s.SaveDetails(ctx, c, []byte("50%")))
	ki, err := e.in.Key(ctx, "k1")
	must(t, err)
	if !ki.Leased || ki.LeaseFence != c.Fence || ki.Owner == "-" || ki.Remaining <= 0 || ki.Remaining > 2*time.Second ||
		ki.State != idempotency.Processing || string(ki.Details) != "50%" || ki.LeaseKey == "" {
		t.Fatalf("Key of a running job = %+v", ki)
	}
	l, ok, err := e.in.Lease(ctx, "k1")
	must(t, err)
	if !ok || l.Fence != c.Fence || l.Owner != ki.Owner {
		t.Fatalf("Lease = %+v, %v; want fence %d owner %s", l, ok, c.Fence, ki.Owner)
	}
	must(t, e.s.Complete(ctx, c, []byte("done")))
	ki, err = e.in.Key(ctx, "k1")
	must(t, err)
	if ki.Leased || ki.State != idempotency.Completed || string(ki.Result) != "done" || ki.ResultSize != 4 || ki.Fence != c.Fence {
		t.Fatalf("Key of a completed job = %+v", ki)
	}
}

// TestLeasesPages: Leases lists every held lease with its record, over
// pages, and leaves out released ones.
func TestLeasesPages(t *testing.T) {
	t.Parallel()
	e := setup(t)
	ctx := t.Context()
	keys := []string{"a", "b", "c", "d", "e"}
	for _, k := range keys {
		e.claim(t, k, idempotency.Acquired)
	}
	done := e.claim(t, "f", idempotency.Acquired)
	must(t, e.s.Complete(ctx, done, nil))
	seen := map[string]bool{}
	cur := ""
	for range 100 {
		p, err := e.in.Leases(ctx, cur, 2)
		must(t, err)
		for _, l := range p.Leases {
			if !l.Idempotency || l.Record == nil || l.Record.State != idempotency.Processing || l.Fence == 0 {
				t.Fatalf("lease %+v", l)
			}
			seen[l.Name] = true
		}
		if cur = p.Next; cur == "" {
			break
		}
	}
	if len(seen) != len(keys) || seen["f"] {
		t.Fatalf("Leases saw %v, want %v", seen, keys)
	}
}

// TestExpireFenceChecked: Expire refuses another fence and a free key, and
// ends the lease it was given: the holder loses it, and the next claim is a
// takeover with a higher fence.
func TestExpireFenceChecked(t *testing.T) {
	t.Parallel()
	e := setup(t)
	ctx := t.Context()
	c := e.claim(t, "x", idempotency.Acquired)
	if _, err := e.in.Expire(ctx, "x", c.Fence+1); !errors.Is(err, inspect.ErrLeaseChanged) {
		t.Fatalf("Expire with another fence: %v, want ErrLeaseChanged", err)
	}
	if _, err := e.in.Expire(ctx, "free", 0); !errors.Is(err, inspect.ErrNoLease) {
		t.Fatalf("Expire of a free key: %v, want ErrNoLease", err)
	}
	l, err := e.in.Expire(ctx, "x", c.Fence)
	must(t, err)
	if l.Fence != c.Fence {
		t.Fatalf("expired fence %d, want %d", l.Fence, c.Fence)
	}
	waitLost(t, c)
	c2 := e.claim(t, "x", idempotency.Takeover)
	if c2.Fence <= c.Fence {
		t.Fatalf("takeover fence %d not above %d", c2.Fence, c.Fence)
	}
}

// touchBeforeWrite renews a lease key (PEXPIRE from another connection, as
// the holder's renewer does) just before the first n scripts the client it
// hooks runs: between Expire's read and its write.
type touchBeforeWrite struct {
	passHooks
	other *redis.Client
	key   string
	n     atomic.Int32
}

func (h *touchBeforeWrite) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		if name := cmd.Name(); (name == "evalsha" || name == "eval") && h.n.Add(-1) >= 0 {
			if err := h.other.PExpire(ctx, h.key, time.Minute).Err(); err != nil {
				return err
			}
		}
		return next(ctx, cmd)
	}
}

// passHooks passes dials and pipelines through: a hook that embeds it
// defines only ProcessHook.
type passHooks struct{}

func (passHooks) DialHook(next redis.DialHook) redis.DialHook { return next }

func (passHooks) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}

// TestExpireWhileRenewed: a renewal of the lease between Expire's read and
// its write (it extends the key without changing the lease) does not make
// Expire give up: it expires the fence it read.
func TestExpireWhileRenewed(t *testing.T) {
	t.Parallel()
	e := setup(t)
	ctx := t.Context()
	c := e.claim(t, "busy", idempotency.Acquired)
	shared, _ := testkit.SharedRedis(t)
	hook := &touchBeforeWrite{other: shared, key: e.m.Key(c.Lease.Name())}
	hook.n.Store(1)
	in := e.hookedInspector(t, hook)
	l, err := in.Expire(ctx, "busy", c.Fence)
	must(t, err)
	if l.Fence != c.Fence || hook.n.Load() > 0 {
		t.Fatalf("expired fence %d (renewed before the write: %v), want fence %d after a renewal", l.Fence, hook.n.Load() <= 0, c.Fence)
	}
	waitLost(t, c)
}

// hookedInspector returns an Inspector of e's prefix over a client of its
// own on e's Redis, with hook added.
func (e *env) hookedInspector(t *testing.T, hook redis.Hook) *inspect.Inspector {
	t.Helper()
	hooked := redis.NewClient(e.rdb.Options())
	t.Cleanup(func() { _ = hooked.Close() })
	hooked.AddHook(hook)
	in := inspect.New(hooked, inspect.WithPrefix(e.prefix))
	t.Cleanup(func() { _ = in.Close(context.Background()) })
	return in
}

// waitLost waits for c's holder to lose its lease (Expire ended it).
func waitLost(t *testing.T, c *idempotency.Claim) {
	t.Helper()
	select {
	case <-c.Lease.Done():
	case <-time.After(10 * time.Second):
		t.Fatal("the holder did not lose its expired lease")
	}
}

// renewAfterWrite renews a lease key (GETEX PX, as the holder's renewer
// does) from another connection right after the first script that the
// client it hooks runs on that key and that succeeds: within a millisecond
// of Expire's write.
type renewAfterWrite struct {
	passHooks
	other *redis.Client
	key   string
	done  atomic.Bool
	value atomic.Pointer[string] // what the renewal found; nil: nothing
}

func (h *renewAfterWrite) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		err := next(ctx, cmd)
		if name := cmd.Name(); (name == "evalsha" || name == "eval") && err == nil && slices.Contains(cmd.Args(), any(h.key)) &&
			h.done.CompareAndSwap(false, true) {
			if v, gerr := h.other.GetEx(ctx, h.key, time.Minute).Result(); gerr == nil {
				h.value.Store(&v)
			}
		}
		return err
	}
}

// TestExpireNotUndoneByRenewal: a renewal that reaches Redis right after
// Expire's write finds no lease to extend. The expire used to leave the key
// for 1 ms more, and a renewal within it kept the lease alive: the holder
// never lost it (a console test saw this once under load).
func TestExpireNotUndoneByRenewal(t *testing.T) {
	t.Parallel()
	e := setup(t)
	ctx := t.Context()
	c := e.claim(t, "renewed", idempotency.Acquired)
	shared, _ := testkit.SharedRedis(t)
	hook := &renewAfterWrite{other: shared, key: e.m.Key(c.Lease.Name())}
	in := e.hookedInspector(t, hook)
	if _, err := in.Expire(ctx, "renewed", c.Fence); err != nil {
		t.Fatal(err)
	}
	if !hook.done.Load() {
		t.Fatal("no renewal was sent after Expire's script")
	}
	if v := hook.value.Load(); v != nil {
		t.Fatalf("a renewal right after the expire found the lease %q and extended it", *v)
	}
	waitLost(t, c)
}

// TestReset: Reset refuses a live lease, and forgets a completed record so
// that the next claim is a first attempt again.
func TestReset(t *testing.T) {
	t.Parallel()
	e := setup(t)
	ctx := t.Context()
	c := e.claim(t, "r", idempotency.Acquired)
	if _, err := e.in.Reset(ctx, "r", false); !errors.Is(err, idempotency.ErrResetHeld) {
		t.Fatalf("Reset of a held key: %v, want ErrResetHeld", err)
	}
	must(t, e.s.Complete(ctx, c, []byte("v")))
	r, err := e.in.Reset(ctx, "r", false)
	must(t, err)
	if r.State != idempotency.Completed || r.Fence < c.Fence {
		t.Fatalf("Reset = %+v", r)
	}
	c2 := e.claim(t, "r", idempotency.Acquired)
	if c2.Fence <= c.Fence {
		t.Fatalf("fence after reset %d not above %d", c2.Fence, c.Fence)
	}
	must(t, e.s.Complete(ctx, c2, nil))
}

// TestCompensationsListAndRetry: a journal whose undo fails on every
// attempt is listed dead-lettered, and RetryCompensation runs it again
// (once the undo works) through the Inspector's handlers.
func TestCompensationsListAndRetry(t *testing.T) {
	t.Parallel()
	e := setup(t)
	ctx := t.Context()
	fail := true
	must(t, compensation.Register(e.reg, "undo", func(context.Context, string) error {
		if fail {
			return errors.New("downstream down")
		}
		return nil
	}))
	c := e.claim(t, "s", idempotency.Acquired)
	j := e.comp.Journal(c.Lease)
	must(t, j.Step(ctx, "charge", func(context.Context) error { return nil }, "undo", "arg"))
	if err := j.Compensate(ctx); !errors.Is(err, compensation.ErrDeadLettered) {
		t.Fatalf("Compensate: %v, want dead-lettered", err)
	}
	dls, err := e.in.DeadCompensations(ctx, 10)
	must(t, err)
	if len(dls) != 1 || dls[0].Ref.Fence != c.Fence || len(dls[0].Steps) != 1 {
		t.Fatalf("DeadCompensations = %+v", dls)
	}
	ki, err := e.in.Key(ctx, "s")
	must(t, err)
	if len(ki.Journals) != 1 || ki.Journals[0].State != compensation.StateDeadLettered {
		t.Fatalf("Key journals = %+v (err %v)", ki.Journals, ki.JournalErr)
	}
	fail = false
	n, err := e.in.RetryCompensation(ctx, "s")
	must(t, err)
	if n != 1 {
		t.Fatalf("RetryCompensation = %d, want 1", n)
	}
	if _, err := e.in.RetryCompensation(ctx, "s"); !errors.Is(err, inspect.ErrNothingToRetry) {
		t.Fatalf("second retry: %v, want ErrNothingToRetry", err)
	}
}
