package redlock_test

import (
	"context"
	"log/slog"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/leasehold/leasehold/internal/testkit"
	"github.com/leasehold/leasehold/lease"
	"github.com/leasehold/leasehold/lease/redlock"
)

// testTTL is the lease TTL of these tests: short, so that expiry and the
// restart quarantine cost seconds, long enough for a loaded 2-core machine.
const testTTL = 2 * time.Second

// masters is a set of independent redis-server processes for one test.
type masters struct {
	servers []*testkit.RedisServer
}

func startMasters(t *testing.T, n int) *masters {
	t.Helper()
	ms := &masters{}
	for range n {
		ms.servers = append(ms.servers, testkit.StartRedis(t))
	}
	return ms
}

// backend returns a Backend over fresh clients of the masters (as another
// process would have), closed at cleanup, and waits until a quorum is out
// of its restart quarantine.
func (ms *masters) backend(t *testing.T, opts ...redlock.Opt) *redlock.Backend {
	t.Helper()
	var clients []redis.UniversalClient
	for _, s := range ms.servers {
		o := s.Options()
		o.DialTimeout, o.ReadTimeout, o.WriteTimeout = 200*time.Millisecond, 500*time.Millisecond, 500*time.Millisecond
		c := redis.NewClient(o)
		t.Cleanup(func() { _ = c.Close() })
		clients = append(clients, c)
	}
	// A master may take a quarter TTL to answer: the test machine is shared
	// and often loaded.
	b, err := redlock.New(clients, append([]redlock.Opt{redlock.WithTimeoutFactor(0.25)}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 4*testTTL)
	defer cancel()
	if err := b.WaitReady(ctx, testTTL); err != nil {
		t.Fatal(err)
	}
	return b
}

// manager returns a started lease Manager over b, shut down at cleanup.
func manager(t *testing.T, b lease.Backend, opts ...lease.Opt) *lease.Manager {
	t.Helper()
	m, err := lease.NewManagerWithBackend(b, append([]lease.Opt{
		lease.WithTTL(testTTL), lease.WithLogger(slog.New(slog.DiscardHandler)),
	}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := m.Start(ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = m.Shutdown(ctx)
	})
	return m
}

func ctxT(t *testing.T, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}
