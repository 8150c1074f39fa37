package leasehold

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/leasehold/leasehold/internal/testkit"
	"github.com/leasehold/leasehold/lease"
)

// claimLog records, per key, the claim outcomes a worker saw and when its
// handler started a takeover.
type claimLog struct {
	mu        sync.Mutex
	outcomes  map[string][]Outcome
	takeovers map[string]time.Time
	lost      map[string]error
}

func newClaimLog() *claimLog {
	return &claimLog{outcomes: map[string][]Outcome{}, takeovers: map[string]time.Time{}, lost: map[string]error{}}
}

func (l *claimLog) hooks() Hooks {
	return Hooks{
		OnClaim: func(_ context.Context, info ClaimInfo) {
			l.mu.Lock()
			defer l.mu.Unlock()
			l.outcomes[info.Key] = append(l.outcomes[info.Key], info.Outcome)
		},
		OnStart: func(_ context.Context, j *Job) {
			if j.Takeover {
				l.mu.Lock()
				defer l.mu.Unlock()
				l.takeovers[j.Key] = time.Now()
			}
		},
		OnLeaseLost: func(_ context.Context, j *Job, err error) {
			l.mu.Lock()
			defer l.mu.Unlock()
			l.lost[j.Key] = err
		},
	}
}

func (l *claimLog) saw(key string, o Outcome) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, got := range l.outcomes[key] {
		if got == o {
			return true
		}
	}
	return false
}

func (l *claimLog) takeover(key string) (time.Time, bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	at, ok := l.takeovers[key]
	return at, ok
}

func (l *claimLog) lostErr(key string) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.lost[key]
}

// TestJobLeaseTTLPerType runs a job of a short-TTL type and one of a
// long-TTL type on one worker: each lease lives in Redis with its own type's
// TTL and is renewed with it. Then the worker is cut off from Redis (a
// stall): the short job is taken over by another worker after its own TTL,
// well before the worker's TTL, while the long job's lease still stands; the
// stalled worker completes the long job once it reaches Redis again.
func TestJobLeaseTTLPerType(t *testing.T) {
	h := setup(t, 1)
	const (
		workerTTL = 6 * time.Second
		shortTTL  = time.Second
		longTTL   = 10 * time.Second
		interval  = 250 * time.Millisecond
	)
	proxy, ra := h.proxiedRedis(t)

	// Worker a runs both jobs until told to finish (or its lease is lost).
	finish := make(chan struct{})
	blocking := func(ctx context.Context, j *Job) ([]byte, error) {
		select {
		case <-ctx.Done():
			return nil, context.Cause(ctx)
		case <-finish:
			return []byte("a"), nil
		}
	}
	// Worker b, in another group, sees the same records.
	fx := newEffects()
	quick := func(_ context.Context, j *Job) ([]byte, error) {
		fx.add(j.Key)
		return []byte("b"), nil
	}
	register := func(h Handler) func(*Worker) {
		return func(w *Worker) {
			must(t, w.Register("test.short", h, WithJobLeaseTTL(shortTTL)))
			must(t, w.Register("test.long", h, WithJobLeaseTTL(longTTL)))
		}
	}
	opts := []Opt{WithLeaseTTL(workerTTL), WithLeaseOptions(lease.WithRenewInterval(interval)), WithConcurrency(4)}
	alog, blog := newClaimLog(), newClaimLog()
	a := h.start(t, ra, register(blocking), append(opts, WithHooks(alog.hooks()),
		WithRedisProbe(50*time.Millisecond, 200*time.Millisecond))...)
	h.produce(t, []*kgo.Record{
		jobRecord(t, NewJob{Type: "test.short", Key: "short-1"}),
		jobRecord(t, NewJob{Type: "test.long", Key: "long-1"}),
	})
	testkit.Eventually(t, 20*time.Second, "both jobs running on a", func() bool { return len(a.Running()) == 2 })

	rs := a.store.(*redisStore)
	pttl := func(key string) time.Duration {
		t.Helper()
		d, err := h.rdb.PTTL(context.Background(), rs.m.Key(rs.s.LeaseName(key))).Result()
		if err != nil {
			t.Fatal(err)
		}
		return d
	}
	// Sampled past the short TTL: renewals keep each lease alive with its
	// own type's TTL, neither with the worker's.
	for start := time.Now(); time.Since(start) < shortTTL+500*time.Millisecond; time.Sleep(100 * time.Millisecond) {
		if d := pttl("short-1"); d <= 0 || d > shortTTL {
			t.Fatalf("PTTL of the short job's lease = %s, want within (0, %s]", d, shortTTL)
		}
		if d := pttl("long-1"); d <= workerTTL || d > longTTL {
			t.Fatalf("PTTL of the long job's lease = %s, want within (%s, %s]", d, workerTTL, longTTL)
		}
	}

	b := h.start(t, h.rdb, register(quick), append(opts, WithGroup(h.group+"-b"), WithHooks(blog.hooks()))...)
	testkit.Eventually(t, 20*time.Second, "b finds both keys held", func() bool {
		return blog.saw("short-1", OutcomeHeld) && blog.saw("long-1", OutcomeHeld)
	})

	// a stalls: it cannot reach Redis, so its renewals stop.
	proxy.Block()
	blocked := time.Now()
	testkit.Eventually(t, 3*workerTTL, "b takes the short job over", func() bool { _, ok := blog.takeover("short-1"); return ok })
	at, _ := blog.takeover("short-1")
	took := at.Sub(blocked)
	t.Logf("short job taken over %s after a stalled", took)
	if took > 3*time.Second {
		t.Errorf("short job taken over %s after a stalled; its TTL is %s (the worker's %s)", took, shortTTL, workerTTL)
	}
	if d := pttl("long-1"); d <= workerTTL-2*time.Second {
		t.Errorf("the stalled long job's lease has %s left when the short one is taken over, want most of %s", d, longTTL)
	}
	if fx.count("long-1") != 0 || blog.saw("long-1", OutcomeTakeover) {
		t.Error("b ran the long job while a's lease on it stood")
	}
	testkit.Eventually(t, 5*time.Second, "b completes the short job", func() bool { return fx.count("short-1") == 1 })
	testkit.Eventually(t, 5*time.Second, "a gives the short job's lease up", func() bool { return alog.lostErr("short-1") != nil })
	if err := alog.lostErr("short-1"); !errors.Is(err, ErrLeaseLost) {
		t.Errorf("a's short job ended with %v, want ErrLeaseLost", err)
	}
	if err := alog.lostErr("long-1"); err != nil {
		t.Errorf("a lost the long job's lease within its TTL: %v", err)
	}

	// a reaches Redis again within the long job's TTL and completes it; b
	// then replays it.
	proxy.Unblock()
	close(finish)
	testkit.Eventually(t, 20*time.Second, "b replays the long job", func() bool { return blog.saw("long-1", OutcomeDuplicate) })
	if n := a.Stats().Succeeded; n != 1 {
		t.Errorf("a completed %d jobs, want 1 (the long one)", n)
	}
	if n := fx.count("long-1"); n != 0 {
		t.Errorf("b ran the long job %d times, want 0", n)
	}
	if n := b.Stats().Succeeded; n != 1 {
		t.Errorf("b completed %d jobs, want 1 (the short one)", n)
	}
}

// Register refuses a job type's lease TTL that the worker's renew interval
// (its lease TTL / 3, or WithLeaseOptions) plus drift does not fit in, and a
// negative one; the type stays unregistered.
func TestRegisterJobLeaseTTL(t *testing.T) {
	t.Parallel()
	rdb := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1"})
	t.Cleanup(func() { _ = rdb.Close() })
	noop := func(context.Context, *Job) ([]byte, error) { return nil, nil }
	newWorker := func(opts ...Opt) *Worker {
		t.Helper()
		w, err := New(rdb, opts...)
		if err != nil {
			t.Fatal(err)
		}
		return w
	}

	w := newWorker() // lease TTL 15s: renewed every 5s
	for _, ttl := range []time.Duration{-time.Second, time.Second, 5 * time.Second} {
		if err := w.Register("t", noop, WithJobLeaseTTL(ttl)); !errors.Is(err, ErrInvalidLeaseTTL) {
			t.Errorf("Register with lease TTL %s = %v, want ErrInvalidLeaseTTL", ttl, err)
		}
	}
	if err := w.Register("t", noop, WithJobLeaseTTL(time.Second)); !errors.Is(err, lease.ErrInvalid) {
		t.Errorf("a TTL shorter than the renew interval: %v does not carry lease.ErrInvalid", err)
	}
	// The refused type was not registered: it can be, with a TTL that fits.
	if err := w.Register("t", noop, WithJobLeaseTTL(6*time.Second)); err != nil {
		t.Errorf("Register with lease TTL 6s: %v", err)
	}
	if err := w.Register("u", noop, WithJobLeaseTTL(time.Hour)); err != nil {
		t.Errorf("Register with lease TTL 1h: %v", err)
	}
	// A TTL from WithJobDefaults is checked too.
	if err := newWorker(WithJobDefaults(WithJobLeaseTTL(2*time.Second))).Register("t", noop); !errors.Is(err, ErrInvalidLeaseTTL) {
		t.Errorf("a too short TTL from WithJobDefaults: %v, want ErrInvalidLeaseTTL", err)
	}
	// The check uses the renew interval and drift the worker's lease manager
	// will use.
	fast := newWorker(WithLeaseOptions(lease.WithRenewInterval(200 * time.Millisecond)))
	if err := fast.Register("t", noop, WithJobLeaseTTL(time.Second)); err != nil {
		t.Errorf("a 1s TTL with a 200ms renew interval: %v", err)
	}
	drifty := newWorker(WithLeaseOptions(lease.WithRenewInterval(200*time.Millisecond), lease.WithDrift(900*time.Millisecond)))
	if err := drifty.Register("t", noop, WithJobLeaseTTL(time.Second)); !errors.Is(err, ErrInvalidLeaseTTL) {
		t.Errorf("a 1s TTL with a 200ms renew interval and 900ms drift: %v, want ErrInvalidLeaseTTL", err)
	}
}
