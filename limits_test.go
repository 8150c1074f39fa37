package leasehold

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/leasehold/leasehold/internal/limit"
	"github.com/leasehold/leasehold/internal/testkit"
)

// gauge counts the handlers entered and not left, and keeps the most seen.
type gauge struct{ now, most atomic.Int64 }

func (g *gauge) enter() {
	n := g.now.Add(1)
	for m := g.most.Load(); n > m && !g.most.CompareAndSwap(m, n); m = g.most.Load() {
	}
}

func (g *gauge) leave() { g.now.Add(-1) }

// work stands for a job's work: it takes d, or ends with the job's context.
func work(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return context.Cause(ctx)
	}
}

// TestLimitConcurrencyAcrossWorkers: three in-process workers (one process,
// each with its own Kafka client, lease manager and Redis pool) run 30 jobs
// of a type limited to 2 fleet-wide, each worker allowed 4 at once. The
// handlers count themselves in and out; a sampler reads the count too; it
// never exceeds 2, and every job ends once.
func TestLimitConcurrencyAcrossWorkers(t *testing.T) {
	t.Parallel()
	const n, lim = 30, 2
	h := setup(t, 6)
	var g gauge
	runs := newEffects()
	handler := func(ctx context.Context, j *Job) ([]byte, error) {
		g.enter()
		defer g.leave()
		runs.add(j.Key)
		return []byte("ok"), work(ctx, 40*time.Millisecond)
	}
	for range 3 {
		h.start(t, h.rdb, func(w *Worker) {
			must(t, w.Register("test.limited", handler, WithConcurrencyLimit(lim)))
		}, WithConcurrency(4))
	}
	var sampled atomic.Int64
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		tk := time.NewTicker(2 * time.Millisecond)
		defer tk.Stop()
		for {
			select {
			case <-stop:
				return
			case <-tk.C:
				if v := g.now.Load(); v > sampled.Load() {
					sampled.Store(v)
				}
			}
		}
	}()
	recs := make([]*kgo.Record, n)
	for i := range recs {
		recs[i] = jobRecord(t, NewJob{Type: "test.limited", Key: fmt.Sprintf("lim-%d", i)})
	}
	h.produce(t, recs)
	h.waitCommitted(t, 60*time.Second)
	close(stop)
	wg.Wait()
	t.Logf("limit_running_max=%d jobs limit_running_sampled_max=%d jobs limit=%d", g.most.Load(), sampled.Load(), lim)
	if m := g.most.Load(); m > lim || sampled.Load() > lim {
		t.Fatalf("%d (sampled %d) handlers ran at once, limit %d", m, sampled.Load(), lim)
	}
	if got := len(runs.snapshot()); got != n {
		t.Fatalf("%d keys ran, want %d", got, n)
	}
	for k, c := range runs.snapshot() {
		if c != 1 {
			t.Errorf("%s ran %d times, want 1", k, c)
		}
	}
	info, err := limit.Read(t.Context(), h.rdb, h.prefix, "type:test.limited")
	must(t, err)
	if info[0].Running != 0 {
		t.Fatalf("%d slots left after every job ended: %+v", info[0].Running, info[0].Slots)
	}
}

// TestLimitSlotsOfACutWorkerLapse: worker A runs two jobs of a type limited
// to 2 and loses Redis (its proxy blocked) while it holds both slots; it can
// neither renew nor give them back. Worker B (another group and topic, the
// same Redis and prefix) then gets three jobs of the type: none starts
// before A's slots lapse, one lease TTL after A's last renewal, and all
// three run.
func TestLimitSlotsOfACutWorkerLapse(t *testing.T) {
	t.Parallel()
	ha := setup(t, 1)
	hb := setup(t, 1)
	hb.prefix = ha.prefix
	proxy, ardb := ha.proxiedRedis(t)
	entered := make(chan string, 2)
	ha.start(t, ardb, func(w *Worker) {
		must(t, w.Register("test.limited", func(ctx context.Context, j *Job) ([]byte, error) {
			entered <- j.Key
			<-ctx.Done()
			return nil, context.Cause(ctx)
		}, WithConcurrencyLimit(2)))
	})
	ha.produce(t, []*kgo.Record{jobRecord(t, NewJob{Type: "test.limited", Key: "a-1"}),
		jobRecord(t, NewJob{Type: "test.limited", Key: "a-2"})})
	<-entered
	<-entered
	cut := time.Now()
	proxy.Block()

	runs := newEffects()
	var first atomic.Int64
	hb.start(t, hb.rdb, func(w *Worker) {
		must(t, w.Register("test.limited", func(_ context.Context, j *Job) ([]byte, error) {
			first.CompareAndSwap(0, time.Now().UnixNano())
			runs.add(j.Key)
			return []byte("ok"), nil
		}, WithConcurrencyLimit(2)))
	})
	hb.produce(t, []*kgo.Record{jobRecord(t, NewJob{Type: "test.limited", Key: "b-1"}),
		jobRecord(t, NewJob{Type: "test.limited", Key: "b-2"}), jobRecord(t, NewJob{Type: "test.limited", Key: "b-3"})})
	testkit.Eventually(t, 30*time.Second, "B runs its jobs once A's slots lapsed", func() bool { return len(runs.snapshot()) == 3 })
	waited := time.Duration(first.Load() - cut.UnixNano())
	t.Logf("limit_slot_lapse_after_cut=%.2f s lease_ttl=2 s", waited.Seconds())
	// A's last renewal came at most one renew interval (TTL/3) before the cut.
	if waited < 2*time.Second-2*time.Second/3-100*time.Millisecond {
		t.Fatalf("B started a job %v after A was cut, before A's slots could lapse", waited)
	}
}

// TestLimitRate: a type limited to 20 jobs a second (burst 1) keeps to it:
// 40 jobs take about 2s.
func TestLimitRate(t *testing.T) {
	t.Parallel()
	const n, rate = 40, 20.0
	h := setup(t, 2)
	var mu sync.Mutex
	var starts []time.Time
	h.start(t, h.rdb, func(w *Worker) {
		must(t, w.Register("test.rated", func(_ context.Context, _ *Job) ([]byte, error) {
			mu.Lock()
			starts = append(starts, time.Now())
			mu.Unlock()
			return []byte("ok"), nil
		}, WithRateLimit(rate, 1)))
	}, WithConcurrency(8))
	recs := make([]*kgo.Record, n)
	for i := range recs {
		recs[i] = jobRecord(t, NewJob{Type: "test.rated", Key: fmt.Sprintf("rate-%d", i)})
	}
	h.produce(t, recs)
	h.waitCommitted(t, 60*time.Second)
	mu.Lock()
	defer mu.Unlock()
	if len(starts) != n {
		t.Fatalf("%d starts, want %d", len(starts), n)
	}
	first, last := starts[0], starts[0]
	for _, s := range starts {
		first, last = minTime(first, s), maxTime(last, s)
	}
	observed := float64(n-1) / last.Sub(first).Seconds()
	t.Logf("limit_rate_set=%.0f jobs/s limit_rate_observed=%.1f jobs/s jobs=%d", rate, observed, n)
	if observed > rate*1.5 {
		t.Fatalf("observed %.1f jobs/s, rate %.0f", observed, rate)
	}
}

func minTime(a, b time.Time) time.Time {
	if b.Before(a) {
		return b
	}
	return a
}

func maxTime(a, b time.Time) time.Time {
	if b.After(a) {
		return b
	}
	return a
}

// TestRetryAfterHoldsItsGroup: jobs are grouped by tenant (the key's
// prefix). The first job of tenant a answers RetryAfter(D); then 5 more jobs
// of tenant a and 5 of tenant b are produced. No job of tenant a (the first
// one's retry included) starts before D has passed since the handler
// returned; tenant b's jobs run meanwhile; every job completes once.
func TestRetryAfterHoldsItsGroup(t *testing.T) {
	t.Parallel()
	const d = 3 * time.Second
	h := setup(t, 2)
	var mu sync.Mutex
	starts := map[string][]time.Time{}
	returned := make(chan time.Time, 1)
	tenant := func(j *Job) string { return j.Key[:1] }
	w := h.start(t, h.rdb, func(w *Worker) {
		must(t, w.Register("test.api", func(_ context.Context, j *Job) ([]byte, error) {
			mu.Lock()
			starts[j.Key] = append(starts[j.Key], time.Now())
			first := j.Key == "a-0" && len(starts[j.Key]) == 1
			mu.Unlock()
			if first {
				returned <- time.Now()
				return nil, RetryAfter(d, errors.New("429 too many requests"))
			}
			return []byte("ok"), nil
		}, WithLimitKey(tenant, 0)))
	}, WithConcurrency(4))
	h.produce(t, []*kgo.Record{jobRecord(t, NewJob{Type: "test.api", Key: "a-0"})})
	t0 := <-returned
	var recs []*kgo.Record
	for i := 1; i <= 5; i++ {
		recs = append(recs, jobRecord(t, NewJob{Type: "test.api", Key: fmt.Sprintf("a-%d", i)}),
			jobRecord(t, NewJob{Type: "test.api", Key: fmt.Sprintf("b-%d", i)}))
	}
	h.produce(t, recs)
	testkit.Eventually(t, d, "the held group's records counted (HeldByLimit, leasehold.limit.held)", func() bool {
		return w.HeldByLimit() > 0
	})
	h.waitCommitted(t, 60*time.Second)
	if n := w.HeldByLimit(); n != 0 {
		t.Errorf("HeldByLimit = %d after every record ended", n)
	}
	mu.Lock()
	defer mu.Unlock()
	var firstA, lastB time.Time
	for k, ss := range starts {
		s := ss[len(ss)-1]
		if k[0] == 'a' && (firstA.IsZero() || s.Before(firstA)) {
			firstA = s
		}
		if k[0] == 'b' && s.After(lastB) {
			lastB = s
		}
		if want := 1 + boolInt(k == "a-0"); len(ss) != want {
			t.Errorf("%s started %d times, want %d", k, len(ss), want)
		}
	}
	t.Logf("retry_after=%.1f s group_held_for=%.2f s other_group_done_after=%.2f s",
		d.Seconds(), firstA.Sub(t0).Seconds(), lastB.Sub(t0).Seconds())
	if firstA.Sub(t0) < d {
		t.Fatalf("a job of the held group started %v after the Retry-After of %v", firstA.Sub(t0), d)
	}
	if !lastB.Before(firstA) {
		t.Fatalf("the other group's jobs did not run while the group was held (last b %v, first a %v after)", lastB.Sub(t0), firstA.Sub(t0))
	}
}

func boolInt(b bool) int {
	if b {
		return 1
	}
	return 0
}

// TestLimitOptionsConflict: a type has one limit group.
func TestLimitOptionsConflict(t *testing.T) {
	t.Parallel()
	h := setup(t, 1)
	w, err := New(h.rdb, h.opts()...)
	must(t, err)
	h0 := func(context.Context, *Job) ([]byte, error) { return nil, nil }
	err = w.Register("t.both", h0, WithConcurrencyLimit(2), WithLimitKey(func(*Job) string { return "x" }, 2))
	if !errors.Is(err, ErrConflictingOptions) {
		t.Fatalf("both limits: %v, want ErrConflictingOptions", err)
	}
	if err := w.Register("t.neg", h0, WithRateLimit(-1, 1)); !errors.Is(err, ErrConflictingOptions) {
		t.Fatalf("negative rate: %v", err)
	}
	var ra *RetryAfterError
	if e := RetryAfter(time.Second, errors.New("x")); !errors.Is(e, ErrRetryAfter) || !errors.As(e, &ra) || ra.Delay != time.Second {
		t.Fatalf("RetryAfter: %v", e)
	}
}
