package lease_test

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/leasehold/leasehold/internal/leasing"
	"github.com/leasehold/leasehold/internal/testkit"
	"github.com/leasehold/leasehold/lease"
)

// fakeManager is a started Manager over a fakeBackend and a fakeClock.
func fakeManager(t *testing.T, opts ...lease.Opt) (*lease.Manager, *fakeBackend, *fakeClock) {
	t.Helper()
	clk := newFakeClock()
	b := newFakeBackend(clk)
	m, err := lease.NewManagerWithBackend(b, append([]lease.Opt{lease.WithClock(clk)}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	if err := m.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = m.Shutdown(context.Background()) })
	return m, b, clk
}

func isDone(l *lease.Lease) bool {
	select {
	case <-l.Done():
		return true
	default:
		return false
	}
}

// A backend that never answers must not delay the loss: the lease ends at
// its local deadline while the renewal is still hanging.
func TestDeadlineWhileBackendHangs(t *testing.T) {
	const ttl, interval = 10 * time.Second, 3 * time.Second
	m, b, clk := fakeManager(t, lease.WithTTL(ttl), lease.WithRenewInterval(interval), lease.WithDrift(100*time.Millisecond))
	hung := make(chan struct{})
	b.setRenew(func(ctx context.Context, rs []lease.Renewal) []lease.RenewResult {
		hung <- struct{}{}
		<-ctx.Done() // a server that never answers: only the batch deadline ends the call
		out := make([]lease.RenewResult, len(rs))
		for i := range out {
			out[i].Err = fmt.Errorf("%w: %w", lease.ErrUnavailable, ctx.Err())
		}
		return out
	})
	l := acquire(t, m, "job")
	lost := make(chan error, 1)
	l.OnLost(func(err error) { lost <- err })
	want := clk.Now().Add(ttl - 100*time.Millisecond)
	if got := l.Deadline(); !got.Equal(want) {
		t.Fatalf("Deadline = %v, want acquisition send time + TTL - drift = %v", got, want)
	}

	clk.tick(t, interval)
	<-hung // the first renewal is in flight and will not come back
	clk.Advance(want.Sub(clk.Now()) - time.Millisecond)
	if isDone(l) {
		t.Fatalf("lease lost %s before its deadline", time.Millisecond)
	}
	clk.Advance(time.Millisecond)
	if !isDone(l) {
		t.Fatal("lease still held at its local deadline while the renewal hangs")
	}
	if err := l.Err(); !errors.Is(err, lease.ErrRenewDeadline) || !errors.Is(err, lease.ErrLost) {
		t.Fatalf("Err = %v, want ErrRenewDeadline (and ErrLost)", err)
	}
	if cause := context.Cause(l.Context()); !errors.Is(cause, lease.ErrRenewDeadline) {
		t.Fatalf("context cause = %v", cause)
	}
	select {
	case err := <-lost:
		if !errors.Is(err, lease.ErrRenewDeadline) {
			t.Fatalf("OnLost got %v", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("OnLost not called")
	}
	if n := len(m.Held()); n != 0 {
		t.Fatalf("Held() has %d leases after the loss", n)
	}
}

// The deadline counts from when the successful renewal was sent, not from
// when its answer arrived; a backend's shorter validity (Redlock) shortens it.
func TestDeadlineCountsFromSendTime(t *testing.T) {
	const ttl, interval, drift = 9 * time.Second, 3 * time.Second, 50 * time.Millisecond
	m, b, clk := fakeManager(t, lease.WithTTL(ttl), lease.WithRenewInterval(interval), lease.WithDrift(drift))
	for _, tc := range []struct {
		name  string
		valid time.Duration
		want  time.Duration // from send time
	}{
		{"backend TTL", 0, ttl - drift},
		{"shorter validity", 7 * time.Second, 7*time.Second - drift},
	} {
		t.Run(tc.name, func(t *testing.T) {
			sent := make(chan time.Time, 1)
			b.setRenew(func(_ context.Context, rs []lease.Renewal) []lease.RenewResult {
				sent <- clk.Now()
				clk.Advance(2 * time.Second) // a slow answer
				out := make([]lease.RenewResult, len(rs))
				for i := range out {
					out[i].Valid = tc.valid
				}
				return out
			})
			l := acquire(t, m, "job-"+tc.name)
			defer func() { _ = l.Release(context.Background()) }()
			// A renewal only ever moves the deadline forward: take one sent
			// an interval after the acquisition, so that even the shorter
			// validity lands past the acquisition's deadline.
			acquired := clk.Now()
			var at time.Time
			for at.Sub(acquired) < interval {
				clk.tickNext(t)
				at = <-sent
			}
			testkit.Eventually(t, 5*time.Second, "deadline moved", func() bool { return l.Deadline().Equal(at.Add(tc.want)) })
			b.setRenew(nil)
			<-b.calls
		})
	}
}

// Stolen and expired answers end the lease at once; transient errors are
// retried (sooner than the interval) and a later success keeps the lease.
func TestRenewOutcomes(t *testing.T) {
	const ttl, interval = 9 * time.Second, 3 * time.Second
	m, b, clk := fakeManager(t, lease.WithTTL(ttl), lease.WithRenewInterval(interval))
	stolen, expired, flaky := acquire(t, m, "stolen"), acquire(t, m, "expired"), acquire(t, m, "flaky")
	failures := 2
	b.setRenew(func(_ context.Context, rs []lease.Renewal) []lease.RenewResult {
		out := make([]lease.RenewResult, len(rs))
		for i, r := range rs {
			switch r.Name {
			case "stolen":
				out[i].Err = lease.ErrStolen
			case "expired":
				out[i].Err = fmt.Errorf("wrapped: %w", lease.ErrExpired)
			case "flaky":
				if failures > 0 {
					out[i].Err = fmt.Errorf("%w: connection refused", lease.ErrUnavailable)
				}
			}
		}
		if failures > 0 {
			failures--
		}
		return out
	})
	clk.tick(t, interval)
	<-b.calls
	testkit.Eventually(t, 5*time.Second, "stolen and expired leases lost", func() bool { return isDone(stolen) && isDone(expired) })
	if !errors.Is(stolen.Err(), lease.ErrStolen) || !errors.Is(expired.Err(), lease.ErrExpired) {
		t.Fatalf("Err = %v, %v", stolen.Err(), expired.Err())
	}
	if isDone(flaky) {
		t.Fatalf("a transient failure ended the lease: %v", flaky.Err())
	}
	// The retry comes after a quarter interval, not a whole one.
	for range 2 { // one more failure, then a success
		clk.tick(t, interval/4-time.Millisecond)
		select {
		case <-b.calls:
			t.Fatal("retried before a quarter interval")
		case <-time.After(20 * time.Millisecond):
		}
		clk.Advance(time.Millisecond)
		if rs := <-b.calls; len(rs) != 1 || rs[0].Name != "flaky" {
			t.Fatalf("retry renewed %v", rs)
		}
	}
	sentOK := clk.Now()
	testkit.Eventually(t, 5*time.Second, "deadline extended", func() bool { return flaky.Deadline().After(sentOK) })
	if err := flaky.Err(); err != nil {
		t.Fatalf("flaky lease lost: %v", err)
	}
}

// Adopt tracks a grant made elsewhere, from its send time; a grant already past
// its local deadline is refused.
func TestAdoptDeadline(t *testing.T) {
	const ttl = 3 * time.Second
	// No renew round in the second that passes before Adopt.
	m, _, clk := fakeManager(t, lease.WithTTL(ttl), lease.WithDrift(0), lease.WithRenewInterval(2*time.Second))
	sent := clk.Now()
	clk.Advance(time.Second)
	l, err := leasing.Adopt(context.Background(), m, lease.Grant{Name: "a", Token: leasing.NewToken(), Fence: 7, SentAt: sent})
	if err != nil {
		t.Fatal(err)
	}
	if got, want := l.Deadline(), sent.Add(ttl); !got.Equal(want) {
		t.Fatalf("Deadline = %v, want %v", got, want)
	}
	if l.Fence() != 7 || l.TTL() != ttl {
		t.Fatalf("Fence %d TTL %s", l.Fence(), l.TTL())
	}
	_, err = leasing.Adopt(context.Background(), m, lease.Grant{Name: "b", Token: leasing.NewToken(), TTL: time.Second, SentAt: sent})
	if !errors.Is(err, lease.ErrRenewDeadline) {
		t.Fatalf("Adopt of an expired grant: %v", err)
	}
	for _, g := range []lease.Grant{
		{Name: "", Token: "t", SentAt: sent},
		{Name: "c", SentAt: sent},
		{Name: "c", Token: "t"},
	} {
		if _, err := leasing.Adopt(context.Background(), m, g); !errors.Is(err, lease.ErrInvalid) {
			t.Errorf("Adopt(%+v) = %v, want ErrInvalid", g, err)
		}
	}
}

// Shutdown waits for OnLost callbacks still running, and a callback
// registered after the loss runs at once.
func TestShutdownWaitsForCallbacks(t *testing.T) {
	const ttl = 3 * time.Second
	m, b, clk := fakeManager(t, lease.WithTTL(ttl))
	b.setRenew(func(_ context.Context, rs []lease.Renewal) []lease.RenewResult {
		out := make([]lease.RenewResult, len(rs))
		for i := range out {
			out[i].Err = lease.ErrUnavailable
		}
		return out
	})
	l := acquire(t, m, "job")
	release, started := make(chan struct{}), make(chan struct{})
	var finished atomic.Bool
	l.OnLost(func(error) {
		close(started)
		<-release
		finished.Store(true)
	})
	clk.Advance(ttl) // past the deadline: no renewal answered
	<-started
	var late error
	l.OnLost(func(err error) { late = err })
	if !errors.Is(late, lease.ErrRenewDeadline) {
		t.Fatalf("late OnLost got %v", late)
	}

	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	if err := m.Shutdown(ctx); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Shutdown with a callback still running = %v, want the context's error", err)
	}
	if finished.Load() {
		t.Fatal("callback finished before it was let go")
	}
	close(release)
	testkit.Eventually(t, 5*time.Second, "callback finished", finished.Load)
}

// The deadline watcher follows the earliest deadline: a lease adopted with a
// shorter TTL than those already held is lost at its own deadline, and the
// others at theirs.
func TestDeadlineWatcherEarliestFirst(t *testing.T) {
	const ttl = 9 * time.Second
	m, b, clk := fakeManager(t, lease.WithTTL(ttl), lease.WithRenewInterval(3*time.Second), lease.WithDrift(0))
	b.setRenew(func(_ context.Context, rs []lease.Renewal) []lease.RenewResult {
		out := make([]lease.RenewResult, len(rs))
		for i := range out {
			out[i].Err = lease.ErrUnavailable
		}
		return out
	})
	long := acquire(t, m, "long")
	short, err := leasing.Adopt(context.Background(), m, lease.Grant{Name: "short", Token: leasing.NewToken(), TTL: 2 * time.Second, SentAt: clk.Now()})
	if err != nil {
		t.Fatal(err)
	}
	clk.Advance(2*time.Second - time.Millisecond)
	if isDone(short) {
		t.Fatal("short lease lost before its deadline")
	}
	clk.Advance(time.Millisecond)
	if !isDone(short) || isDone(long) {
		t.Fatalf("at 2s: short done %v, long done %v", isDone(short), isDone(long))
	}
	clk.Advance(ttl - 2*time.Second - time.Millisecond)
	if isDone(long) {
		t.Fatal("long lease lost before its deadline")
	}
	clk.Advance(time.Millisecond)
	if !isDone(long) {
		t.Fatal("long lease held past its deadline")
	}
}
