package lease_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/leasehold/leasehold/internal/leasing"
	"github.com/leasehold/leasehold/internal/testkit"
	"github.com/leasehold/leasehold/lease"
)

// A lease held for five TTLs survives through renewals, and each renewal
// moves its local deadline.
func TestLeaseSurvivesRenewals(t *testing.T) {
	t.Parallel()
	const ttl = time.Second
	m, c, _ := setup(t, lease.WithTTL(ttl))
	l := acquire(t, m, "long")
	first := l.Deadline()
	select {
	case <-l.Done():
		t.Fatalf("lease lost during 5 TTLs: %v", l.Err())
	case <-time.After(5 * ttl):
	}
	if tok := holder(c, m.Key("long")); tok != leasing.Token(l) {
		t.Fatalf("owner in Redis = %q, want ours", tok)
	}
	if d := l.Deadline(); d.Sub(first) < 3*ttl {
		t.Fatalf("deadline moved by %s in 5 TTLs", d.Sub(first))
	}
	if err := l.Release(context.Background()); err != nil {
		t.Fatal(err)
	}
}

// A lease whose key is overwritten or deleted behind its back ends within
// one renew interval, with its context cancelled with the cause.
func TestLostOnRenewal(t *testing.T) {
	t.Parallel()
	const ttl, interval = 3 * time.Second, 500 * time.Millisecond
	m, c, _ := setup(t, lease.WithTTL(ttl), lease.WithRenewInterval(interval))
	ctx := context.Background()
	for _, tc := range []struct {
		name  string
		steal func(key string) error
		want  error
	}{
		{"overwritten", func(key string) error { return c.Do(ctx, "set", key, "thief 1 3000", "keepttl").Err() }, lease.ErrStolen},
		{"deleted", func(key string) error { return c.Del(ctx, key).Err() }, lease.ErrExpired},
	} {
		t.Run(tc.name, func(t *testing.T) {
			l := acquire(t, m, tc.name)
			lost := make(chan error, 1)
			l.OnLost(func(err error) { lost <- err })
			time.Sleep(interval / 2)
			at := time.Now()
			if err := tc.steal(m.Key(tc.name)); err != nil {
				t.Fatal(err)
			}
			took := waitDone(t, l, ttl).Sub(at)
			// One interval, plus scheduling slack on a shared machine.
			if took > interval+interval/2 {
				t.Fatalf("Done closed %s after the steal, want within a renew interval (%s)", took, interval)
			}
			if !errors.Is(l.Err(), tc.want) || !errors.Is(context.Cause(l.Context()), tc.want) || l.Context().Err() == nil {
				t.Fatalf("Err %v, cause %v, want %v", l.Err(), context.Cause(l.Context()), tc.want)
			}
			if err := <-lost; !errors.Is(err, tc.want) {
				t.Fatalf("OnLost got %v", err)
			}
		})
	}
}

// A paused (SIGSTOPped) Redis: the holder gives the lease up at its local
// deadline, before the key could expire in Redis and let anyone else in.
func TestPausedRedisLosesAtDeadline(t *testing.T) {
	t.Parallel()
	const ttl, interval, drift = 1500 * time.Millisecond, 300 * time.Millisecond, 300 * time.Millisecond
	srv := testkit.StartRedis(t)
	opt := srv.Options()
	opt.ReadTimeout, opt.WriteTimeout = 10*time.Second, 10*time.Second // the client alone would wait past the TTL
	c := newClient(t, opt)
	m := start(t, c, lease.WithTTL(ttl), lease.WithRenewInterval(interval), lease.WithDrift(drift))
	l := acquire(t, m, "job")
	// At least one renewal went through: the local deadline moves when one
	// is answered.
	first := l.Deadline()
	testkit.Eventually(t, 10*time.Second, "a renewal", func() bool { return l.Deadline().After(first) })

	srv.Pause()
	defer srv.Resume()
	pausedAt := time.Now()
	deadline := l.Deadline()
	// The deadline is the last answered renewal's send time + TTL - drift;
	// Redis started that TTL when it received the renewal, later: the key
	// lives at least until the send time + TTL.
	expiresNoEarlierThan := deadline.Add(drift)
	doneAt := waitDone(t, l, 2*ttl)
	if !errors.Is(l.Err(), lease.ErrRenewDeadline) {
		t.Fatalf("Err = %v, want ErrRenewDeadline", l.Err())
	}
	if doneAt.Before(deadline) {
		t.Fatalf("lost %s before the local deadline", deadline.Sub(doneAt))
	}
	if late := doneAt.Sub(deadline); late > drift {
		t.Fatalf("lost %s after the local deadline", late)
	}
	if !doneAt.Before(expiresNoEarlierThan) {
		t.Fatalf("lost at %s, not before the key could expire (%s)", doneAt, expiresNoEarlierThan)
	}
	t.Logf("paused at %s; lost %s later, %s before the key could expire",
		pausedAt.Format(time.StampMilli), doneAt.Sub(pausedAt), expiresNoEarlierThan.Sub(doneAt))
}

// Renewals survive a restart that kept the data (the script cache is empty
// afterwards: NOSCRIPT is answered by loading the script again).
func TestRenewAcrossRestartWithData(t *testing.T) {
	t.Parallel()
	const ttl, interval = 3 * time.Second, 200 * time.Millisecond
	srv := testkit.StartRedis(t)
	m := start(t, srv.Client(t), lease.WithTTL(ttl), lease.WithRenewInterval(interval))
	l := acquire(t, m, "job")
	srv.Restart(true)
	before := l.Deadline()
	testkit.Eventually(t, 5*time.Second, "a renewal after the restart", func() bool { return l.Deadline().After(before) })
	if err := l.Err(); err != nil {
		t.Fatalf("lease lost across a restart with data: %v", err)
	}
}

// failingRenewals wraps a backend and fails every renewal while on is set.
type failingRenewals struct {
	lease.Backend
	on atomic.Bool
}

func (f *failingRenewals) RenewBatch(ctx context.Context, rs []lease.Renewal) []lease.RenewResult {
	if !f.on.Load() {
		return f.Backend.RenewBatch(ctx, rs)
	}
	out := make([]lease.RenewResult, len(rs))
	for i := range out {
		out[i].Err = fmt.Errorf("%w: injected", lease.ErrUnavailable)
	}
	return out
}

// A lease given up at its local deadline is released as soon as the backend
// answers again, rather than blocking others until its key expires.
func TestGivenUpLeaseReleased(t *testing.T) {
	t.Parallel()
	const ttl, interval, drift = 1500 * time.Millisecond, 300 * time.Millisecond, 800 * time.Millisecond
	c, prefix := testkit.SharedRedis(t)
	fb := &failingRenewals{Backend: lease.NewRedisBackend(c, prefix)}
	logs := &countingHandler{}
	m, err := lease.NewManagerWithBackend(fb, lease.WithTTL(ttl), lease.WithRenewInterval(interval),
		lease.WithDrift(drift), lease.WithLogger(slog.New(logs)))
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if err := m.Start(ctx); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = m.Shutdown(ctx) }()
	l := acquire(t, m, "job")
	fb.on.Store(true)
	waitDone(t, l, 2*ttl)
	if !errors.Is(l.Err(), lease.ErrRenewDeadline) {
		t.Fatalf("Err = %v", l.Err())
	}
	left := c.PTTL(ctx, m.Key("job")).Val()
	if left <= 0 {
		t.Fatalf("key already gone at the local deadline (PTTL %s): the drift did not hold", left)
	}
	fb.on.Store(false)
	start := time.Now()
	testkit.Eventually(t, 5*time.Second, "abandoned lease released", func() bool { return c.Exists(ctx, m.Key("job")).Val() == 0 })
	if took := time.Since(start); took >= left {
		t.Fatalf("key gone after %s, no sooner than its TTL (%s left)", took, left)
	}
	// Many rounds failed, one warning said so.
	if n := logs.count("lease renewals failing; retrying until each lease's local deadline"); n != 1 {
		t.Fatalf("%d warnings about failing renewals, want 1", n)
	}
}

// countingHandler counts log messages.
type countingHandler struct {
	mu   sync.Mutex
	msgs map[string]int
}

func (h *countingHandler) Enabled(context.Context, slog.Level) bool { return true }
func (h *countingHandler) WithAttrs([]slog.Attr) slog.Handler       { return h }
func (h *countingHandler) WithGroup(string) slog.Handler            { return h }
func (h *countingHandler) Handle(_ context.Context, r slog.Record) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.msgs == nil {
		h.msgs = map[string]int{}
	}
	h.msgs[r.Message]++
	return nil
}

func (h *countingHandler) count(msg string) int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.msgs[msg]
}

// lostAnswers runs acquisitions but reports them failed, as when the reply
// is lost to a timeout after the script ran.
type lostAnswers struct {
	lease.Backend
	acquired atomic.Int32
}

func (b *lostAnswers) Acquire(ctx context.Context, name, token string, ttl time.Duration) (lease.Grant, error) {
	if _, err := b.Backend.Acquire(ctx, name, token, ttl); err != nil {
		return lease.Grant{}, err
	}
	b.acquired.Add(1)
	return lease.Grant{}, fmt.Errorf("%w: i/o timeout", lease.ErrUnavailable)
}

// An acquisition whose answer was lost does not keep the name locked for a
// TTL: the renewer releases it by token.
func TestLostAcquireAnswerReleased(t *testing.T) {
	t.Parallel()
	const ttl, interval = 3 * time.Second, 200 * time.Millisecond
	c, prefix := testkit.SharedRedis(t)
	b := &lostAnswers{Backend: lease.NewRedisBackend(c, prefix)}
	m, err := lease.NewManagerWithBackend(b,
		lease.WithTTL(ttl), lease.WithRenewInterval(interval))
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if err := m.Start(ctx); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = m.Shutdown(ctx) }()
	if _, err := m.Acquire(ctx, "job"); !errors.Is(err, lease.ErrUnavailable) {
		t.Fatalf("Acquire = %v", err)
	}
	if b.acquired.Load() != 1 {
		t.Fatal("the acquisition did not reach Redis")
	}
	start := time.Now()
	testkit.Eventually(t, 5*time.Second, "orphan lease released", func() bool { return c.Exists(ctx, m.Key("job")).Val() == 0 })
	if took := time.Since(start); took > ttl/2 {
		t.Fatalf("released after %s", took)
	}
}

// Work registered with OnRenewRound runs in the renewer after each round,
// held leases or not, with a context bounded by the renew interval, and stops
// with the Manager.
func TestOnRenewRound(t *testing.T) {
	t.Parallel()
	const interval = 50 * time.Millisecond
	m, _, _ := setup(t, lease.WithTTL(time.Second), lease.WithRenewInterval(interval))
	var calls atomic.Int64
	bounded := make(chan bool, 1)
	leasing.OnRenewRound(m, func(ctx context.Context) {
		calls.Add(1)
		dl, ok := ctx.Deadline()
		select {
		case bounded <- ok && time.Until(dl) <= interval:
		default:
		}
	})
	testkit.Eventually(t, 5*time.Second, "three rounds without a lease", func() bool { return calls.Load() >= 3 })
	acquire(t, m, "held")
	n := calls.Load()
	testkit.Eventually(t, 5*time.Second, "three rounds with a lease", func() bool { return calls.Load() >= n+3 })
	if !<-bounded {
		t.Fatal("the hook's context is not bounded by the renew interval")
	}
	if err := m.Shutdown(t.Context()); err != nil {
		t.Fatal(err)
	}
	n = calls.Load()
	time.Sleep(4 * interval)
	if got := calls.Load(); got != n {
		t.Fatalf("%d rounds ran after Shutdown", got-n)
	}
}

// TestRecoveryLoggedOnRenewal: "lease renewals succeed again" is logged once
// a renewal has succeeded, not after a round that renewed nothing (one that
// only released a lease given up on its deadline) while renewals still fail.
func TestRecoveryLoggedOnRenewal(t *testing.T) {
	t.Parallel()
	const ttl, interval, drift = 1500 * time.Millisecond, 300 * time.Millisecond, 800 * time.Millisecond
	c, prefix := testkit.SharedRedis(t)
	fb := &failingRenewals{Backend: lease.NewRedisBackend(c, prefix)}
	logs := &countingHandler{}
	m, err := lease.NewManagerWithBackend(fb, lease.WithTTL(ttl), lease.WithRenewInterval(interval),
		lease.WithDrift(drift), lease.WithLogger(slog.New(logs)))
	if err != nil {
		t.Fatal(err)
	}
	var rounds atomic.Int64
	leasing.OnRenewRound(m, func(context.Context) { rounds.Add(1) })
	ctx := context.Background()
	if err := m.Start(ctx); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = m.Shutdown(ctx) }()
	l := acquire(t, m, "job")
	fb.on.Store(true)
	waitDone(t, l, 2*ttl)
	// The round after the loss releases the given-up lease (releases still
	// work) and renews nothing: renewals still fail.
	testkit.Eventually(t, 5*time.Second, "given-up lease released", func() bool { return c.Exists(ctx, m.Key("job")).Val() == 0 })
	n := rounds.Load()
	testkit.Eventually(t, 5*time.Second, "two more rounds", func() bool { return rounds.Load() >= n+2 })
	if got := logs.count("lease renewals succeed again"); got != 0 {
		t.Fatalf("recovery logged %d times while every renewal failed", got)
	}
	fb.on.Store(false)
	acquire(t, m, "next")
	testkit.Eventually(t, 5*time.Second, "recovery logged after a renewal succeeded", func() bool {
		return logs.count("lease renewals succeed again") == 1
	})
}
