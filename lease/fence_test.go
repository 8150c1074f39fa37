package lease_test

import (
	"context"
	"testing"
	"time"

	"github.com/leasehold/leasehold/internal/testkit"
	"github.com/leasehold/leasehold/lease"
)

func TestFenceIncreasesOverCycles(t *testing.T) {
	t.Parallel()
	m, _, _ := setup(t, lease.WithTTL(3*time.Second))
	ctx := context.Background()
	var prev uint64
	for i := range 1000 {
		l := acquire(t, m, "cycle")
		if l.Fence() <= prev {
			t.Fatalf("cycle %d: fence %d after %d", i, l.Fence(), prev)
		}
		prev = l.Fence()
		if err := l.Release(ctx); err != nil {
			t.Fatal(err)
		}
	}
}

func TestFenceIncreasesAcrossExpiry(t *testing.T) {
	t.Parallel()
	const ttl = 300 * time.Millisecond
	c, prefix := testkit.SharedRedis(t)
	ctx := context.Background()
	var prev uint64
	for i := range 3 {
		// A holder that stops renewing (left on shutdown): the key expires.
		m := start(t, c, lease.WithPrefix(prefix), lease.WithTTL(ttl), lease.WithLeaveOnShutdown(true))
		l := acquire(t, m, "exp")
		if l.Fence() <= prev {
			t.Fatalf("round %d: fence %d after %d", i, l.Fence(), prev)
		}
		prev = l.Fence()
		if err := m.Shutdown(ctx); err != nil {
			t.Fatal(err)
		}
		testkit.Eventually(t, 5*time.Second, "key expired", func() bool { return c.Exists(ctx, m.Key("exp")).Val() == 0 })
	}
}

// After Redis restarts without its data, fences still go up: they come from
// server time, which (by assumption) did not go back.
func TestFenceIncreasesAcrossDataLoss(t *testing.T) {
	t.Parallel()
	srv := testkit.StartRedis(t)
	c := srv.Client(t)
	ctx := context.Background()
	m := start(t, c, lease.WithTTL(3*time.Second))
	var prev uint64
	for round := range 3 {
		for i := range 100 {
			l := acquire(t, m, "job")
			if l.Fence() <= prev {
				t.Fatalf("round %d cycle %d: fence %d after %d", round, i, l.Fence(), prev)
			}
			prev = l.Fence()
			if err := l.Release(ctx); err != nil {
				t.Fatal(err)
			}
		}
		srv.Restart(false)
		if n := c.DBSize(ctx).Val(); n != 0 {
			t.Fatalf("restarted server has %d keys, want none", n)
		}
	}
}
