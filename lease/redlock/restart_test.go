package redlock_test

import (
	"context"
	"errors"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/leasehold/leasehold/internal/testkit"
	"github.com/leasehold/leasehold/lease"
	"github.com/leasehold/leasehold/lease/redlock"
)

// restartScenario builds the case Redlock's restart rule exists for, on
// three masters: A locks "x" while master 2 is down, so A's quorum is
// {0, 1}; then master 0 restarts without its data and master 2 comes back
// (empty). Masters 0 and 2 now form a quorum that has never heard of A. A
// renews rarely, as a holder in a long pause would: what protects it is that
// nobody may lock "x" before A's local deadline, whether or not A notices
// anything. It returns A's lease, that deadline, and a second Manager B
// (other clients, as another process).
func restartScenario(t *testing.T, opts ...redlock.Opt) (a *lease.Lease, deadline time.Time, mb *lease.Manager) {
	t.Helper()
	ms := startMasters(t, 3)
	ma := manager(t, ms.backend(t, opts...), lease.WithRenewInterval(testTTL*3/4))
	mb = manager(t, ms.backend(t, opts...))
	ms.servers[2].Kill()
	a, err := ma.Acquire(ctxT(t, 10*time.Second), "x")
	if err != nil {
		t.Fatal(err)
	}
	ms.servers[0].Restart(false)
	ms.servers[2].Restart(false)
	deadline = a.Deadline()
	if !time.Now().Before(deadline) {
		t.Fatalf("restarting two masters outlasted A's lease (deadline %s ago): the scenario did not happen", time.Since(deadline))
	}
	return a, deadline, mb
}

// TestRestartWithoutDataQuarantined: the backend keeps a master that lost
// its data out of every quorum for a TTL, so B cannot lock "x" before A's
// deadline; it gets the lease only after, with a greater fence.
func TestRestartWithoutDataQuarantined(t *testing.T) {
	a, deadline, mb := restartScenario(t)
	ctx := ctxT(t, 20*time.Second)
	_, err := mb.Acquire(ctx, "x")
	if !errors.Is(err, redlock.ErrQuarantined) || !errors.Is(err, redlock.ErrNoQuorum) {
		t.Fatalf("B's acquire before A's deadline: err = %v, want ErrNoQuorum with ErrQuarantined", err)
	}
	var b *lease.Lease
	for b == nil {
		b, err = mb.Acquire(ctx, "x")
		if err != nil && !errors.Is(err, lease.ErrUnavailable) && !errors.Is(err, lease.ErrHeld) {
			t.Fatal(err)
		}
		if ctx.Err() != nil {
			t.Fatalf("B never acquired: %v", err)
		}
		time.Sleep(50 * time.Millisecond)
	}
	if got := time.Now(); got.Before(deadline) {
		t.Fatalf("B acquired x %s before A's deadline", deadline.Sub(got))
	}
	if b.Fence() <= a.Fence() {
		t.Fatalf("B's fence %d not above A's %d", b.Fence(), a.Fence())
	}
}

// TestRestartWithoutDataUnsafeWithoutQuarantine is the control: with the
// quarantine turned off, the same scenario lets B in before A's deadline,
// while A may still act on its lease. It shows what the quarantine
// prevents, and that the scenario above would catch its absence.
func TestRestartWithoutDataUnsafeWithoutQuarantine(t *testing.T) {
	a, deadline, mb := restartScenario(t, redlock.WithRestartQuarantine(-1))
	b, err := mb.Acquire(ctxT(t, 10*time.Second), "x")
	if err != nil {
		t.Fatalf("without the quarantine B was refused (%v): the control no longer shows the hazard", err)
	}
	if left := time.Until(deadline); left <= 0 {
		t.Fatalf("B acquired after A's deadline: no overlap shown")
	} else {
		t.Logf("two owners of x for up to %s: A (fence %d) and B (fence %d)", left, a.Fence(), b.Fence())
	}
}

// TestFenceSurvivesDataLoss: fences keep growing over acquire/release cycles
// while masters, one at a time, restart without their data.
func TestFenceSurvivesDataLoss(t *testing.T) {
	ms := startMasters(t, 3)
	b := ms.backend(t)
	m := manager(t, b)
	ctx := ctxT(t, 60*time.Second)
	var last uint64
	cycle := func() {
		t.Helper()
		l, err := m.Acquire(ctx, "f")
		if err != nil {
			t.Fatal(err)
		}
		if l.Fence() <= last {
			t.Fatalf("fence %d after %d", l.Fence(), last)
		}
		last = l.Fence()
		if err := l.Release(ctx); err != nil {
			t.Fatal(err)
		}
	}
	for round, s := range ms.servers {
		for range 30 {
			cycle()
		}
		s.Restart(false)
		wctx, cancel := context.WithTimeout(ctx, 4*testTTL)
		if err := b.WaitReady(wctx, testTTL); err != nil {
			t.Fatalf("round %d: %v", round, err)
		}
		cancel()
	}
	for range 30 {
		cycle()
	}
}

// TestRenewBatchPipelines: renewing many leases sends each master a few
// pipelines, not one command per lease.
func TestRenewBatchPipelines(t *testing.T) {
	ms := startMasters(t, 3)
	var clients []redis.UniversalClient
	counters := make([]*countHook, len(ms.servers))
	for i, s := range ms.servers {
		o := s.Options()
		o.ReadTimeout, o.WriteTimeout = 5*time.Second, 5*time.Second
		c := redis.NewClient(o)
		counters[i] = &countHook{}
		c.AddHook(counters[i])
		t.Cleanup(func() { _ = c.Close() })
		clients = append(clients, c)
	}
	// A long TTL so that no lease expires while 2,000 are acquired on a
	// loaded machine; the quarantine (which would last that TTL) is beside
	// the point here.
	const ttl = 60 * time.Second
	const n = 2000
	// All extends at once, so that what is measured is the batcher alone.
	// A 20ms linger (200us by default): on a loaded machine the 2,000
	// renewals' goroutines start further apart than the default linger,
	// and the batches would measure the scheduler, not the batcher.
	b, err := redlock.New(clients, redlock.WithRestartQuarantine(-1), redlock.WithRenewConcurrency(n),
		redlock.WithBatchLinger(20*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	ctx := ctxT(t, 60*time.Second)
	rs := make([]lease.Renewal, n)
	var wg sync.WaitGroup
	sem := make(chan struct{}, 64)
	for i := range rs {
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			name := "batch-" + itoa(i)
			g, err := b.Acquire(ctx, name, "tok-"+itoa(i), ttl)
			if err != nil {
				t.Error(err)
				return
			}
			rs[i] = lease.Renewal{Name: name, Token: g.Token, Fence: g.Fence, TTL: ttl}
		})
	}
	wg.Wait()
	if t.Failed() {
		t.FailNow()
	}
	// Acquire and fail-fast extends return on a quorum: the last master's
	// scripts may still arrive. settled waits until every master has all n
	// of them and has been quiet for a while.
	scripts := func(c *countHook) int { _, piped, single := c.get(); return piped + single }
	settled := func(what string) {
		t.Helper()
		last, quietSince := -1, time.Now()
		testkit.Eventually(t, 30*time.Second, what, func() bool {
			total := 0
			for _, c := range counters {
				if scripts(c) < n {
					return false
				}
				total += scripts(c)
			}
			if total != last {
				last, quietSince = total, time.Now()
			}
			return time.Since(quietSince) > 300*time.Millisecond
		})
	}
	settled("the acquires reach every master")
	for _, c := range counters {
		c.reset()
	}
	sent := time.Now()
	res := b.RenewBatch(ctx, rs)
	took := time.Since(sent)
	settled("the renewals reach every master")
	for i, r := range res {
		// Valid counts from before the batch was sent, so it may exceed the
		// TTL by at most the time the batch took.
		if r.Err != nil || r.Valid <= 0 || r.Valid > ttl+took {
			t.Fatalf("renewal %d: err %v, valid %s", i, r.Err, r.Valid)
		}
	}
	for i, c := range counters {
		pipes, cmds, single := c.get()
		// Unbatched, each master would get 2,000 single commands; batched, a
		// handful of pipelines. On a loaded machine goroutines start slowly
		// and pipelines leave smaller, hence the loose bound: at least 20
		// leases per pipeline on average.
		if single != 0 || cmds != n || pipes > n/20 {
			t.Errorf("master %d: %d pipelines carrying %d commands, %d single commands; want %d commands in at most %d pipelines",
				i, pipes, cmds, single, n, n/20)
		}
		t.Logf("master %d: %d leases renewed in %d pipelines", i, n, pipes)
	}
}

func itoa(i int) string { return strconv.Itoa(i) }
