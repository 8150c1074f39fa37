package lease_test

import (
	"context"
	"os"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/leasehold/leasehold/internal/testkit"
	"github.com/leasehold/leasehold/lease"
)

// setup returns a started Manager on the shared Redis under a fresh prefix,
// shut down at cleanup, with its client and prefix.
func setup(t *testing.T, opts ...lease.Opt) (*lease.Manager, *redis.Client, string) {
	t.Helper()
	c, prefix := testkit.SharedRedis(t)
	return start(t, c, append([]lease.Opt{lease.WithPrefix(prefix)}, opts...)...), c, prefix
}

// start makes and starts a Manager, shut down at cleanup.
func start(t *testing.T, c redis.UniversalClient, opts ...lease.Opt) *lease.Manager {
	t.Helper()
	m, err := lease.NewManager(c, opts...)
	if err != nil {
		t.Fatalf("NewManager: %v", err)
	}
	if err := m.Start(context.Background()); err != nil {
		t.Fatalf("Start: %v", err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = m.Shutdown(ctx)
	})
	return m
}

// acquire acquires name or fails the test.
func acquire(t *testing.T, m *lease.Manager, name string) *lease.Lease {
	t.Helper()
	l, err := m.Acquire(context.Background(), name)
	if err != nil {
		t.Fatalf("Acquire(%q): %v", name, err)
	}
	return l
}

// waitDone waits for l to end, failing the test after d.
func waitDone(t *testing.T, l *lease.Lease, d time.Duration) time.Time {
	t.Helper()
	select {
	case <-l.Done():
		return time.Now()
	case <-time.After(d):
		t.Fatalf("lease %q still held after %s", l.Name(), d)
		return time.Time{}
	}
}

// fencePrelude reads the prelude that scripts.Fenced puts in front of every
// fenced script, so that tests can build fenced scripts of their own.
func fencePrelude(t *testing.T) string {
	t.Helper()
	b, err := os.ReadFile("../lua/fence_prelude.lua")
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// fakeClock is a manual Clock: time moves only in Advance, which runs due
// AfterFunc callbacks in the caller's goroutine and fires due timers.
type fakeClock struct {
	mu     sync.Mutex
	now    time.Time
	timers []*fakeTimer
}

func newFakeClock() *fakeClock { return &fakeClock{now: time.Unix(1_700_000_000, 0)} }

type fakeTimer struct {
	c      *fakeClock
	at     time.Time
	f      func()
	ch     chan time.Time
	active bool
}

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *fakeClock) add(d time.Duration, f func()) *fakeTimer {
	c.mu.Lock()
	defer c.mu.Unlock()
	t := &fakeTimer{c: c, at: c.now.Add(d), f: f, active: true}
	if f == nil {
		t.ch = make(chan time.Time, 1)
	}
	c.timers = append(c.timers, t)
	return t
}

func (c *fakeClock) NewTimer(d time.Duration) lease.Timer { return c.add(d, nil) }

func (c *fakeClock) AfterFunc(d time.Duration, f func()) lease.Timer { return c.add(d, f) }

// Advance moves time forward by d, firing what falls due, in order.
func (c *fakeClock) Advance(d time.Duration) {
	c.mu.Lock()
	end := c.now.Add(d)
	c.mu.Unlock()
	for {
		c.mu.Lock()
		var due []*fakeTimer
		for _, t := range c.timers {
			if t.active && !t.at.After(end) {
				due = append(due, t)
			}
		}
		if len(due) == 0 {
			c.now = end
			c.mu.Unlock()
			return
		}
		sort.Slice(due, func(i, j int) bool { return due[i].at.Before(due[j].at) })
		t := due[0]
		t.active = false
		if t.at.After(c.now) {
			c.now = t.at
		}
		now := c.now
		c.mu.Unlock()
		if t.f != nil {
			t.f()
		} else {
			select {
			case t.ch <- now:
			default:
			}
		}
	}
}

// armed reports whether a channel timer (the renewer's) is waiting.
func (c *fakeClock) armed() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, t := range c.timers {
		if t.active && t.f == nil {
			return true
		}
	}
	return false
}

// tickNext waits until the renewer has armed its timer, then advances time
// exactly to it, so that the round starts without time moving further.
func (c *fakeClock) tickNext(t *testing.T) {
	t.Helper()
	testkit.Eventually(t, 5*time.Second, "renew timer armed", c.armed)
	c.mu.Lock()
	var at time.Time
	for _, tm := range c.timers {
		if tm.active && tm.f == nil && (at.IsZero() || tm.at.Before(at)) {
			at = tm.at
		}
	}
	d := at.Sub(c.now)
	c.mu.Unlock()
	c.Advance(d)
}

// tick waits until the renewer has armed its timer, then advances by d.
func (c *fakeClock) tick(t *testing.T, d time.Duration) {
	t.Helper()
	testkit.Eventually(t, 5*time.Second, "renew timer armed", c.armed)
	c.Advance(d)
}

func (t *fakeTimer) C() <-chan time.Time { return t.ch }

func (t *fakeTimer) Stop() bool {
	t.c.mu.Lock()
	defer t.c.mu.Unlock()
	was := t.active
	t.active = false
	return was
}

func (t *fakeTimer) Reset(d time.Duration) bool {
	t.c.mu.Lock()
	defer t.c.mu.Unlock()
	was := t.active
	t.active, t.at = true, t.c.now.Add(d)
	return was
}

// fakeBackend is an in-memory Backend whose renewals the test scripts.
type fakeBackend struct {
	clock *fakeClock
	mu    sync.Mutex
	fence uint64
	// renew answers each RenewBatch call; nil renews everything.
	renew func(ctx context.Context, rs []lease.Renewal) []lease.RenewResult
	calls chan []lease.Renewal
}

func newFakeBackend(c *fakeClock) *fakeBackend {
	return &fakeBackend{clock: c, calls: make(chan []lease.Renewal, 100)}
}

func (b *fakeBackend) Key(name string) string { return "fake:" + name }

func (b *fakeBackend) Acquire(_ context.Context, name, token string, ttl time.Duration) (lease.Grant, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.fence++
	return lease.Grant{Name: name, Token: token, Fence: b.fence, TTL: ttl}, nil
}

func (b *fakeBackend) RenewBatch(ctx context.Context, rs []lease.Renewal) []lease.RenewResult {
	b.mu.Lock()
	f := b.renew
	b.mu.Unlock()
	var out []lease.RenewResult
	if f != nil {
		out = f(ctx, rs)
	} else {
		out = make([]lease.RenewResult, len(rs))
	}
	b.calls <- rs
	return out
}

func (b *fakeBackend) setRenew(f func(ctx context.Context, rs []lease.Renewal) []lease.RenewResult) {
	b.mu.Lock()
	b.renew = f
	b.mu.Unlock()
}

func (b *fakeBackend) Release(context.Context, string, string, uint64) error { return nil }

func (b *fakeBackend) Fenced(context.Context, string, string, uint64, *redis.Script, []string, []any) (any, error) {
	return int64(1), nil
}

// newClient returns a client closed at cleanup.
func newClient(t *testing.T, opt *redis.Options) *redis.Client {
	c := redis.NewClient(opt)
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// steal overwrites the lease key with another owner's (token "thief"), its
// expiry kept: what a takeover behind the holder's back leaves.
func steal(t *testing.T, c redis.UniversalClient, key string) {
	t.Helper()
	if err := c.Do(context.Background(), "set", key, "thief 1 60000", "keepttl").Err(); err != nil {
		t.Fatal(err)
	}
}

// holder returns the owner token stored in the lease key ("" when none).
func holder(c redis.UniversalClient, key string) string {
	tok, _, _ := strings.Cut(c.Get(context.Background(), key).Val(), " ")
	return tok
}
