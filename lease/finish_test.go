package lease_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/leasehold/leasehold/internal/leasing"
	"github.com/leasehold/leasehold/internal/testkit"
	"github.com/leasehold/leasehold/lease"
)

// unavailable answers every renewal with a transient failure, so that
// deadlines stay where they are.
func unavailable(_ context.Context, rs []lease.Renewal) []lease.RenewResult {
	out := make([]lease.RenewResult, len(rs))
	for i := range out {
		out[i].Err = lease.ErrUnavailable
	}
	return out
}

// lostCalls records the OnLost callbacks of one lease.
type lostCalls struct {
	mu   sync.Mutex
	errs []error
}

func onLost(l *lease.Lease) *lostCalls {
	c := &lostCalls{}
	l.OnLost(func(err error) {
		c.mu.Lock()
		c.errs = append(c.errs, err)
		c.mu.Unlock()
	})
	return c
}

func (c *lostCalls) get() []error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]error(nil), c.errs...)
}

// endedReleased checks that l ended as Release ends it: Done closed, Err and
// the context's cause ErrReleased, no OnLost, no longer held by m.
func endedReleased(t *testing.T, m *lease.Manager, l *lease.Lease, lost *lostCalls) {
	t.Helper()
	if !isDone(l) {
		t.Fatal("lease still held")
	}
	if !errors.Is(l.Err(), lease.ErrReleased) || !errors.Is(context.Cause(l.Context()), lease.ErrReleased) {
		t.Fatalf("Err %v, context cause %v; want ErrReleased", l.Err(), context.Cause(l.Context()))
	}
	if errs := lost.get(); len(errs) != 0 {
		t.Fatalf("OnLost ran: %v", errs)
	}
	for _, h := range m.Held() {
		if h == l {
			t.Fatal("Manager still holds the lease")
		}
	}
}

// While finishing, neither a renewal that finds the lease gone nor the local
// deadline ends it; Forget then ends it as released, without OnLost.
func TestFinishHoldsLossBackUntilForget(t *testing.T) {
	const ttl, interval = 9 * time.Second, 3 * time.Second
	m, b, clk := fakeManager(t, lease.WithTTL(ttl), lease.WithRenewInterval(interval), lease.WithDrift(0))
	l := acquire(t, m, "job")
	lost := onLost(l)
	if err := leasing.BeginFinish(l); err != nil {
		t.Fatal(err)
	}
	b.setRenew(func(_ context.Context, rs []lease.Renewal) []lease.RenewResult {
		out := make([]lease.RenewResult, len(rs))
		for i := range out {
			out[i].Err = lease.ErrExpired // the finishing script deleted the key
		}
		return out
	})
	clk.tickNext(t)
	if rs := nextCall(t, b); len(rs) != 1 || rs[0].Name != "job" {
		t.Fatalf("renewed %v, want the finishing lease", rs)
	}
	roundDone(t, clk)
	if isDone(l) {
		t.Fatalf("finishing lease ended on a renewal: %v", l.Err())
	}
	// Past the deadline: the watcher fires, and another round answers
	// "expired" as well.
	clk.Advance(l.Deadline().Sub(clk.Now()) + time.Second)
	nextCall(t, b)
	roundDone(t, clk)
	if isDone(l) {
		t.Fatalf("finishing lease ended: %v", l.Err())
	}
	leasing.Forget(l)
	endedReleased(t, m, l, lost)
	leasing.AbortFinish(l, true) // settled: nothing more happens
	if !errors.Is(l.Err(), lease.ErrReleased) {
		t.Fatalf("AbortFinish after Forget changed Err to %v", l.Err())
	}
}

// AbortFinish(true): the finishing script was refused, the lease is lost at
// once with OnLost; AbortFinish(false) past the deadline: lost on the
// deadline.
func TestAbortFinishReportsLoss(t *testing.T) {
	const ttl, interval = 9 * time.Second, 3 * time.Second
	m, b, clk := fakeManager(t, lease.WithTTL(ttl), lease.WithRenewInterval(interval), lease.WithDrift(0))
	b.setRenew(unavailable)
	refused, late := acquire(t, m, "refused"), acquire(t, m, "late")
	refusedLost, lateLost := onLost(refused), onLost(late)
	for _, l := range []*lease.Lease{refused, late} {
		if err := leasing.BeginFinish(l); err != nil {
			t.Fatal(err)
		}
	}
	leasing.AbortFinish(refused, true)
	if !isDone(refused) || !errors.Is(refused.Err(), lease.ErrLost) || !errors.Is(context.Cause(refused.Context()), lease.ErrLost) {
		t.Fatalf("refused finish: done %v, err %v", isDone(refused), refused.Err())
	}
	testkit.Eventually(t, 5*time.Second, "OnLost of the refused lease", func() bool { return len(refusedLost.get()) == 1 })
	if err := refusedLost.get()[0]; !errors.Is(err, lease.ErrLost) {
		t.Fatalf("OnLost got %v", err)
	}

	clk.Advance(late.Deadline().Sub(clk.Now()) + time.Millisecond)
	if isDone(late) {
		t.Fatalf("finishing lease ended at its deadline: %v", late.Err())
	}
	leasing.AbortFinish(late, false)
	if !isDone(late) || !errors.Is(late.Err(), lease.ErrRenewDeadline) {
		t.Fatalf("unanswered finish past the deadline: done %v, err %v", isDone(late), late.Err())
	}
	testkit.Eventually(t, 5*time.Second, "OnLost of the late lease", func() bool { return len(lateLost.get()) == 1 })
	if err := lateLost.get()[0]; !errors.Is(err, lease.ErrRenewDeadline) {
		t.Fatalf("OnLost got %v", err)
	}
}

// nextCall waits for the next renew call, failing the test after 5s.
func nextCall(t *testing.T, b *fakeBackend) []lease.Renewal {
	t.Helper()
	select {
	case rs := <-b.calls:
		return rs
	case <-time.After(5 * time.Second):
		t.Fatal("no renew call within 5s")
		return nil
	}
}

// roundDone waits until the renewer has handled the answers of its round
// (it arms its timer again after that).
func roundDone(t *testing.T, clk *fakeClock) {
	t.Helper()
	testkit.Eventually(t, 5*time.Second, "renew round done", clk.armed)
}

// AbortFinish(false) before the deadline: the lease is held again, and the
// deadline watcher, which skipped it while it was finishing, watches it
// again.
func TestAbortFinishRearmsDeadline(t *testing.T) {
	const ttl, interval = 9 * time.Second, 3 * time.Second
	m, b, clk := fakeManager(t, lease.WithTTL(ttl), lease.WithRenewInterval(interval), lease.WithDrift(0))
	b.setRenew(unavailable)
	first := acquire(t, m, "first")
	clk.Advance(time.Second) // before the first round (at 3s)
	finishing := acquire(t, m, "finishing")
	if err := leasing.BeginFinish(finishing); err != nil {
		t.Fatal(err)
	}

	// The watcher fires for first's deadline and skips the finishing leases:
	// they are not due yet, and it does not arm itself for them.
	clk.Advance(first.Deadline().Sub(clk.Now()))
	if !isDone(first) || isDone(finishing) {
		t.Fatalf("at the first deadline: first %v, finishing %v", first.Err(), finishing.Err())
	}
	leasing.AbortFinish(finishing, false)
	if err := finishing.Err(); err != nil {
		t.Fatalf("abort before the deadline ended the lease: %v", err)
	}
	clk.Advance(finishing.Deadline().Sub(clk.Now()) - time.Millisecond)
	if isDone(finishing) {
		t.Fatal("lost before its deadline")
	}
	clk.Advance(time.Millisecond)
	if !isDone(finishing) || !errors.Is(finishing.Err(), lease.ErrRenewDeadline) {
		t.Fatalf("after abort, at its deadline: done %v, err %v (the watcher must watch it again)", isDone(finishing), finishing.Err())
	}
}

// AbortFinish(false) when renewals answered, while the lease was finishing,
// that its key is gone: those answers were held back, and the next renewal
// decides (here: the key is gone, the lease is lost).
func TestAbortFinishNextRenewalDecides(t *testing.T) {
	const ttl, interval = 9 * time.Second, 3 * time.Second
	m, b, clk := fakeManager(t, lease.WithTTL(ttl), lease.WithRenewInterval(interval))
	gone := acquire(t, m, "gone")
	lost := onLost(gone)
	if err := leasing.BeginFinish(gone); err != nil {
		t.Fatal(err)
	}
	b.setRenew(func(_ context.Context, rs []lease.Renewal) []lease.RenewResult {
		out := make([]lease.RenewResult, len(rs))
		for i := range out {
			out[i].Err = lease.ErrExpired
		}
		return out
	})
	clk.tickNext(t)
	nextCall(t, b)
	roundDone(t, clk)
	if isDone(gone) {
		t.Fatalf("renewal loss reported while finishing: %v", gone.Err())
	}
	leasing.AbortFinish(gone, false)
	if err := gone.Err(); err != nil {
		t.Fatalf("abort before the deadline ended the lease: %v", err)
	}
	clk.tickNext(t)
	nextCall(t, b)
	testkit.Eventually(t, 5*time.Second, "loss found by the next renewal", func() bool { return isDone(gone) })
	if !errors.Is(gone.Err(), lease.ErrExpired) {
		t.Fatalf("Err %v, want ErrExpired", gone.Err())
	}
	testkit.Eventually(t, 5*time.Second, "OnLost", func() bool { return len(lost.get()) == 1 })
}

// BeginFinish refuses an ended lease (with its cause) and a second begin;
// Forget and AbortFinish on an ended lease change nothing.
func TestBeginFinishStates(t *testing.T) {
	m, _, _ := fakeManager(t)
	l := acquire(t, m, "job")
	if err := leasing.BeginFinish(l); err != nil {
		t.Fatal(err)
	}
	if err := leasing.BeginFinish(l); !errors.Is(err, lease.ErrInvalid) {
		t.Fatalf("second BeginFinish = %v, want ErrInvalid", err)
	}
	leasing.Forget(l)
	if err := leasing.BeginFinish(l); !errors.Is(err, lease.ErrReleased) {
		t.Fatalf("BeginFinish after Forget = %v, want ErrReleased", err)
	}
	leasing.Forget(l)
	leasing.AbortFinish(l, false)
	if !errors.Is(l.Err(), lease.ErrReleased) {
		t.Fatalf("Err = %v", l.Err())
	}

	// A lease that was never finishing: AbortFinish does nothing.
	h := acquire(t, m, "held")
	leasing.AbortFinish(h, true)
	if err := h.Err(); err != nil {
		t.Fatalf("AbortFinish without BeginFinish ended the lease: %v", err)
	}
	// Forget without BeginFinish ends it locally all the same.
	leasing.Forget(h)
	if !errors.Is(h.Err(), lease.ErrReleased) {
		t.Fatalf("Err = %v", h.Err())
	}

	// Shutdown ends a finishing lease (ErrClosed); settling it afterwards
	// changes nothing.
	s := acquire(t, m, "shutdown")
	if err := leasing.BeginFinish(s); err != nil {
		t.Fatal(err)
	}
	if err := m.Shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
	leasing.AbortFinish(s, true)
	leasing.Forget(s)
	if !errors.Is(s.Err(), lease.ErrClosed) {
		t.Fatalf("Err after Shutdown = %v, want ErrClosed", s.Err())
	}
}

// scriptEnder wraps a backend and says whether a script ends its leases.
type scriptEnder struct {
	lease.Backend
	ends bool
}

func (s scriptEnder) EndsInScript() bool { return s.ends }

// EndsInScript: true for NewManager's Redis backend, false for a backend
// that does not say so (a wrapper), the wrapper's answer when it does.
func TestEndsInScript(t *testing.T) {
	t.Parallel()
	m, c, prefix := setup(t)
	if !leasing.EndsInScript(m) {
		t.Error("NewManager: EndsInScript = false")
	}
	for _, tc := range []struct {
		name string
		b    lease.Backend
		want bool
	}{
		{"wrapped", struct{ lease.Backend }{lease.NewRedisBackend(c, prefix)}, false},
		{"wrapped, says true", scriptEnder{lease.NewRedisBackend(c, prefix), true}, true},
		{"wrapped, says false", scriptEnder{lease.NewRedisBackend(c, prefix), false}, false},
	} {
		wm, err := lease.NewManagerWithBackend(tc.b)
		if err != nil {
			t.Fatal(err)
		}
		if got := leasing.EndsInScript(wm); got != tc.want {
			t.Errorf("%s: EndsInScript = %v, want %v", tc.name, got, tc.want)
		}
	}
}

// renewAnswers wraps the Redis backend and records each renewal's answer.
type renewAnswers struct {
	lease.Backend
	mu   sync.Mutex
	errs []error
}

func (b *renewAnswers) RenewBatch(ctx context.Context, rs []lease.Renewal) []lease.RenewResult {
	out := b.Backend.RenewBatch(ctx, rs)
	b.mu.Lock()
	for _, r := range out {
		b.errs = append(b.errs, r.Err)
	}
	b.mu.Unlock()
	return out
}

func (b *renewAnswers) count(target error) int {
	b.mu.Lock()
	defer b.mu.Unlock()
	n := 0
	for _, err := range b.errs {
		if errors.Is(err, target) {
			n++
		}
	}
	return n
}

// On a real Redis: a fenced script deletes the lease key in its write, the
// renewer runs several rounds against the missing key before the holder
// forgets the lease, and the lease ends released, not lost.
func TestFinishOnRedis(t *testing.T) {
	t.Parallel()
	const interval = 30 * time.Millisecond
	_, c, prefix := setup(t)
	b := &renewAnswers{Backend: lease.NewRedisBackend(c, prefix)}
	m, err := lease.NewManagerWithBackend(b, lease.WithTTL(time.Second), lease.WithRenewInterval(interval))
	if err != nil {
		t.Fatal(err)
	}
	if err := m.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = m.Shutdown(context.Background()) })
	ctx := context.Background()
	finish := redis.NewScript(fencePrelude(t) + "\nredis.call('SET', KEYS[2], ARGV[3])\nredis.call('DEL', KEYS[1])\nreturn 1\n")

	l := acquire(t, m, "{f}job")
	lost := onLost(l)
	if err := leasing.BeginFinish(l); err != nil {
		t.Fatal(err)
	}
	if _, err := leasing.Fenced(ctx, m, l, finish, []string{prefix + "{f}out"}, "done"); err != nil {
		t.Fatal(err)
	}
	if n, _ := c.Exists(ctx, m.Key(l.Name())).Result(); n != 0 {
		t.Fatal("the script did not delete the lease key")
	}
	// Two answers: the round of the first has been handled.
	testkit.Eventually(t, 5*time.Second, "renewals answered expired", func() bool { return b.count(lease.ErrExpired) >= 2 })
	if err := l.Err(); err != nil {
		t.Fatalf("finishing lease ended: %v", err)
	}
	leasing.Forget(l)
	endedReleased(t, m, l, lost)
	if v, _ := c.Get(ctx, prefix+"{f}out").Result(); v != "done" {
		t.Fatalf("the script's write: %q", v)
	}

	// The same script refused (another owner): the loss is reported.
	r := acquire(t, m, "{f}refused")
	rLost := onLost(r)
	if err := leasing.BeginFinish(r); err != nil {
		t.Fatal(err)
	}
	steal(t, c, m.Key(r.Name()))
	// Two answers: the round of the first has been handled.
	testkit.Eventually(t, 5*time.Second, "renewals answered stolen", func() bool { return b.count(lease.ErrStolen) >= 2 })
	if err := r.Err(); err != nil {
		t.Fatalf("loss reported while finishing: %v", err)
	}
	_, err = leasing.Fenced(ctx, m, r, finish, []string{prefix + "{f}out2"}, "zombie")
	if !errors.Is(err, lease.ErrLost) {
		t.Fatalf("refused script = %v, want ErrLost", err)
	}
	leasing.AbortFinish(r, true)
	if !isDone(r) || !errors.Is(r.Err(), lease.ErrLost) {
		t.Fatalf("refused: done %v, err %v", isDone(r), r.Err())
	}
	testkit.Eventually(t, 5*time.Second, "OnLost of the refused lease", func() bool { return len(rLost.get()) == 1 })
	if n, _ := c.Exists(ctx, prefix+"{f}out2").Result(); n != 0 {
		t.Fatal("the refused script wrote")
	}
}
