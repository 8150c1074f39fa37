package idempotency

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"go.uber.org/goleak"

	"github.com/leasehold/leasehold/internal/testkit"
	"github.com/leasehold/leasehold/lease"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// env is one test's Store on the shared Redis under a fresh prefix.
type env struct {
	s      *Store
	m      *lease.Manager
	c      *redis.Client
	prefix string
}

// setup returns a Store over a started Manager (lease TTL 2s unless leaseOpts
// say otherwise) on the shared Redis, with keys under a fresh prefix.
func setup(t *testing.T, opts []Opt, leaseOpts ...lease.Opt) *env {
	t.Helper()
	c, prefix := testkit.SharedRedis(t)
	return setupOn(t, c, prefix, opts, leaseOpts...)
}

func setupOn(t *testing.T, c redis.UniversalClient, prefix string, opts []Opt, leaseOpts ...lease.Opt) *env {
	t.Helper()
	m := startManager(t, c, prefix, leaseOpts...)
	s, err := New(t.Context(), c, m, append([]Opt{WithPrefix(prefix)}, opts...)...)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	rc, _ := c.(*redis.Client)
	return &env{s: s, m: m, c: rc, prefix: prefix}
}

func startManager(t *testing.T, c redis.UniversalClient, prefix string, opts ...lease.Opt) *lease.Manager {
	t.Helper()
	m, err := lease.NewManager(c, append([]lease.Opt{lease.WithPrefix(prefix), lease.WithTTL(2 * time.Second)}, opts...)...)
	if err != nil {
		t.Fatalf("NewManager: %v", err)
	}
	if err := m.Start(t.Context()); err != nil {
		t.Fatalf("Manager.Start: %v", err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = m.Shutdown(ctx)
	})
	return m
}

func fp(s string) Fingerprint {
	f, _ := PayloadFingerprint([]byte(s))
	return f
}

// claim claims k and fails the test unless the outcome is want.
func (e *env) claim(t *testing.T, k string, f Fingerprint, want Outcome) *Claim {
	t.Helper()
	c, err := e.s.Claim(t.Context(), k, f)
	if c.Outcome != want {
		t.Fatalf("Claim(%q) = %v (err %v), want %v", k, c.Outcome, err, want)
	}
	if want != Mismatch && err != nil {
		t.Fatalf("Claim(%q): %v", k, err)
	}
	return c
}

// keys returns the Redis keys under the env's prefix, sorted (KEYS answers
// in the order of the server's table, which a rehash caused by other tests'
// writes changes between two calls).
func (e *env) keys(t *testing.T) []string {
	t.Helper()
	ks, err := e.c.Keys(t.Context(), e.prefix+"*").Result()
	if err != nil {
		t.Fatal(err)
	}
	slices.Sort(ks)
	return ks
}
