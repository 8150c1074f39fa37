package leasehold

import (
	"bytes"
	"context"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/leasehold/leasehold/internal/testkit"
)

// claimCounter is a go-redis hook that counts the claims of one
// idempotency key a client sends: each claim script call names the key's
// details key once per request for it.
type claimCounter struct {
	key string
	n   atomic.Int64
}

func (c *claimCounter) DialHook(next redis.DialHook) redis.DialHook { return next }

func (c *claimCounter) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		c.count(cmd)
		return next(ctx, cmd)
	}
}

func (c *claimCounter) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		for _, cmd := range cmds {
			c.count(cmd)
		}
		return next(ctx, cmds)
	}
}

func (c *claimCounter) count(cmd redis.Cmder) {
	if name := cmd.Name(); name != "evalsha" && name != "eval" {
		return
	}
	for _, a := range cmd.Args() {
		// Keys go out as strings or as Stringers (idempotency's script calls).
		if s := fmt.Sprint(a); strings.Contains(s, "idem:d:") && strings.HasSuffix(s, ":"+c.key) {
			c.n.Add(1)
		}
	}
}

// countedRedis returns a client of the shared Redis whose claims of key are
// counted.
func (h *harness) countedRedis(t *testing.T, key string) (*redis.Client, *claimCounter) {
	t.Helper()
	shared := h.rdb.(*redis.Client).Options()
	c := redis.NewClient(&redis.Options{Addr: shared.Addr, DB: shared.DB})
	t.Cleanup(func() { _ = c.Close() })
	cc := &claimCounter{key: key}
	c.AddHook(cc)
	return c, cc
}

// maxHeldSteps bounds how many held backoff steps (WithHeldBackoff(min,
// max), each delay at least half its step) fit in d.
func maxHeldSteps(minD, maxD, d time.Duration) int {
	n := 0
	step := minD
	for d > 0 {
		d -= step / 2
		step = min(2*step, maxD)
		n++
	}
	return n
}

// blocker is a handler that blocks until release is closed, then counts its
// effect.
func blocker(fx *effects, running chan<- string, release <-chan struct{}) Handler {
	return func(ctx context.Context, j *Job) ([]byte, error) {
		running <- j.Key
		select {
		case <-release:
		case <-ctx.Done():
			return nil, context.Cause(ctx)
		}
		fx.add(j.Key)
		return []byte("done"), nil
	}
}

// TestHeldKeyFloodWaitsOnOneProbe floods a worker with copies of a key that
// another worker holds (its job runs until the test releases it). The
// flooded worker holds no more than its memory budget (plus one poll) and
// claims the key about once per held backoff step, not once per copy; when
// the holder finishes, every copy replays, nothing runs twice and the
// offsets reach the end. The flood is 300 records of 100 KB against a
// 2 MiB budget, fifteen times the budget: the same shape as 1,500 against
// 64 MiB (bench/flood measures that), at a size the shared test machine
// produces in seconds. Before the budget and the key groups, the worker
// fetched all 30 MB and claimed the key ~300 times a backoff step.
func TestHeldKeyFloodWaitsOnOneProbe(t *testing.T) {
	h := setup(t, 1)
	const key, copies, size, budget, conc = "flood-held", 300, 100 << 10, 2 << 20, 4
	holderTopic := h.kafka.Topic(t, "holder", 1)
	h.kafka.CreateTopic(t, holderTopic+".dlq", 1)
	fx := newEffects()
	running, release := make(chan string, 1), make(chan struct{})
	h.start(t, h.rdb, func(w *Worker) { must(t, w.Register("test.flood", blocker(fx, running, release))) },
		WithTopics(holderTopic), WithGroup("g-"+holderTopic), WithDeadLetterTopic(holderTopic+".dlq"))
	hcl := h.kafka.Client(t, kgo.DefaultProduceTopic(holderTopic))
	payload := bytes.Repeat([]byte("x"), size)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	must(t, hcl.ProduceSync(ctx, jobRecord(t, NewJob{Type: "test.flood", Key: key, Payload: payload})).FirstErr())
	<-running // the holder's job runs: the key is held

	recs := make([]*kgo.Record, copies)
	for i := range recs {
		recs[i] = jobRecord(t, NewJob{Type: "test.flood", Key: key, Payload: payload})
	}
	h.produce(t, recs)
	rdb, claims := h.countedRedis(t, key)
	var parkedSteps atomic.Int64
	started := time.Now()
	w := h.start(t, rdb, func(w *Worker) {
		must(t, w.Register("test.flood", func(context.Context, *Job) ([]byte, error) {
			t.Error("a copy of a held key ran")
			return nil, nil
		}))
	}, WithConcurrency(conc), WithMemoryBudget(budget, 0), WithHooks(Hooks{
		OnHeld: func(context.Context, ClaimInfo, time.Duration) { parkedSteps.Add(1) },
	}))
	testkit.Eventually(t, 30*time.Second, "fetching paused (or the flood fetched) and the probe parked 8 times", func() bool {
		st := w.Stats()
		return (st.BudgetPaused || st.InFlight == copies) && parkedSteps.Load() >= 8
	})
	elapsed := time.Since(started)
	got := claims.n.Load()
	bound := int64(maxHeldSteps(20*time.Millisecond, 300*time.Millisecond, elapsed) + 3)
	st := w.Stats()
	t.Logf("held=%d bytes in %d records, parked %d, claims of the key=%d in %v (bound %d)",
		st.HeldBytes, st.InFlight, st.Parked, got, elapsed, bound)
	if got > bound {
		t.Errorf("%d claims of the held key in %v; want at most %d (one per backoff step)", got, elapsed, bound)
	}
	if limit := int64(budget + conc*(size+1024)); st.HeldBytes > limit {
		t.Errorf("holds %d bytes while the key is held; want at most the budget plus one poll, %d", st.HeldBytes, limit)
	}

	close(release) // the holder finishes: every copy replays its result
	testkit.Eventually(t, 60*time.Second, "every copy replayed", func() bool { return w.Stats().Replayed == copies })
	h.waitCommitted(t, 30*time.Second)
	st = w.Stats()
	if limit := int64(budget + conc*(size+1024)); st.HeldBytesPeak > limit {
		t.Errorf("held up to %d bytes; want at most the budget plus one poll, %d", st.HeldBytesPeak, limit)
	}
	if st.BudgetPauses == 0 {
		t.Errorf("fetching never paused for the budget")
	}
	if n := fx.count(key); n != 1 {
		t.Errorf("the key's job ran %d times, want 1", n)
	}
	if st.HeldBytes != 0 || st.InFlight != 0 || st.Parked != 0 {
		t.Errorf("after the flood: held %d bytes, %d in flight, %d parked; want none", st.HeldBytes, st.InFlight, st.Parked)
	}
}

// TestOrderedKeyFloodStaysInBudget queues records behind a busy ordering
// key (WithOrderedKeys; the first record's job runs until released): the
// worker stops fetching at its memory budget instead of queueing the whole
// partition, then runs every record in offset order and commits to the end.
// Before the budget, all 30 MB were queued (200 records of 150 KB against a
// 2 MiB budget).
func TestOrderedKeyFloodStaysInBudget(t *testing.T) {
	h := setup(t, 1)
	const records, size, budget, conc = 200, 150 << 10, 2 << 20, 4
	payload := bytes.Repeat([]byte("o"), size)
	recs := make([]*kgo.Record, records)
	for i := range recs {
		recs[i] = jobRecord(t, NewJob{Type: "test.ordered", Key: fmt.Sprintf("ord-%03d", i), Payload: payload,
			PartitionKey: []byte("one-customer")})
	}
	h.produce(t, recs)
	release := make(chan struct{})
	var mu sync.Mutex
	var order []string
	w := h.start(t, h.rdb, func(w *Worker) {
		must(t, w.Register("test.ordered", func(ctx context.Context, j *Job) ([]byte, error) {
			if j.Key == "ord-000" {
				select {
				case <-release:
				case <-ctx.Done():
					return nil, context.Cause(ctx)
				}
			}
			mu.Lock()
			order = append(order, j.Key)
			mu.Unlock()
			return nil, nil
		}))
	}, WithOrderedKeys(true), WithConcurrency(conc), WithMemoryBudget(budget, 0))
	testkit.Eventually(t, 30*time.Second, "fetching paused at the budget (or the flood fetched)", func() bool {
		st := w.Stats()
		return st.BudgetPaused || st.InFlight == records
	})
	st := w.Stats()
	t.Logf("paused at %d bytes in %d records (%d queued)", st.HeldBytes, st.InFlight, st.Parked)
	if limit := int64(budget + conc*(size+1024)); st.HeldBytes > limit {
		t.Errorf("holds %d bytes behind the busy key; want at most the budget plus one poll, %d", st.HeldBytes, limit)
	}
	close(release)
	testkit.Eventually(t, 60*time.Second, "every record run", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(order) == records
	})
	h.waitCommitted(t, 30*time.Second)
	for i, k := range order {
		if want := fmt.Sprintf("ord-%03d", i); k != want {
			t.Fatalf("record %d ran as %s, want %s: order broken", i, k, want)
		}
	}
	if limit := int64(budget + conc*(size+1024)); w.Stats().HeldBytesPeak > limit {
		t.Errorf("held up to %d bytes; want at most the budget plus one poll, %d", w.Stats().HeldBytesPeak, limit)
	}
}

// TestRecordAboveBudgetRuns gives a worker a budget smaller than single
// records: each is still taken when the worker holds less than the budget,
// runs, and is committed; nothing waits for ever. The first big record's
// handler waits until fetching has paused for the budget (it holds more than
// the budget while it runs), so the pause is seen whatever the timing; the
// pause ends once the records are done.
func TestRecordAboveBudgetRuns(t *testing.T) {
	h := setup(t, 1)
	const budget = 64 << 10
	recs := []*kgo.Record{
		jobRecord(t, NewJob{Type: "test.big", Key: "big-1", Payload: bytes.Repeat([]byte("b"), 200<<10)}),
		jobRecord(t, NewJob{Type: "test.big", Key: "big-2", Payload: bytes.Repeat([]byte("b"), 300<<10)}),
		jobRecord(t, NewJob{Type: "test.big", Key: "small", Payload: []byte("s")}),
	}
	h.produce(t, recs)
	fx := newEffects()
	release := make(chan struct{})
	w := h.start(t, h.rdb, func(w *Worker) {
		must(t, w.Register("test.big", func(ctx context.Context, j *Job) ([]byte, error) {
			if j.Key == "big-1" {
				select {
				case <-release:
				case <-ctx.Done():
					return nil, context.Cause(ctx)
				}
			}
			fx.add(j.Key)
			return nil, nil
		}))
	}, WithMemoryBudget(budget, 0))
	testkit.Eventually(t, 30*time.Second, "fetching paused for the budget while big-1 runs", func() bool {
		return w.Stats().BudgetPaused
	})
	close(release)
	h.waitCommitted(t, 30*time.Second)
	for _, k := range []string{"big-1", "big-2", "small"} {
		if n := fx.count(k); n != 1 {
			t.Errorf("%s ran %d times, want 1", k, n)
		}
	}
	// The dispatcher resumes on its next look at the budget after the last
	// record finished, which may come just after the commit.
	testkit.Eventually(t, 30*time.Second, "fetching resumed once the records are done", func() bool {
		return !w.Stats().BudgetPaused
	})
	if st := w.Stats(); st.BudgetPauses == 0 {
		t.Errorf("budget pauses %d; want at least the one seen", st.BudgetPauses)
	}
}

// TestFetchGateReasons: fetching resumes only when every reason to pause it
// has ended, so the memory budget and an unreachable Redis do not resume
// each other's pause.
func TestFetchGateReasons(t *testing.T) {
	t.Parallel()
	var log []string
	g := &fetchGate{pause: func() { log = append(log, "pause") }, resume: func() { log = append(log, "resume") }}
	g.set(pauseBudget, true)
	g.set(pauseRedis, true)
	g.set(pauseRedis, false) // Redis answers again: still over budget
	g.set(pauseBudget, false)
	g.set(pauseBudget, false) // no reason left: nothing to do
	if got, want := strings.Join(log, ","), "pause,resume"; got != want {
		t.Errorf("gate calls %q, want %q", got, want)
	}
}

// TestNewRefusesNegativeBudget: a negative bound is refused by New.
func TestNewRefusesNegativeBudget(t *testing.T) {
	t.Parallel()
	rdb := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1"})
	defer func() { _ = rdb.Close() }()
	for _, o := range []Opt{WithMemoryBudget(-1, 0), WithMemoryBudget(0, -5)} {
		if _, err := New(rdb, o); err == nil || !strings.Contains(err.Error(), "memory budget") {
			t.Errorf("New with a negative budget: %v, want an error naming the memory budget", err)
		}
	}
}

// TestScheduleKeyGroups: copies of a key wait on one probe; a duplicate
// answer takes the copies of the same payload, and the probe's end hands the
// key on to the next copy; a revoked probe hands it on to a live copy.
func TestScheduleKeyGroups(t *testing.T) {
	t.Parallel()
	live, dead := &partTracker{}, &partTracker{removed: true}
	mk := func(tr *partTracker, off int64, val string) *delivery {
		return &delivery{rec: &kgo.Record{Offset: off, Value: []byte(val)}, tracker: tr, key: "k", typ: "t", orderKey: "k"}
	}
	s := newSchedule(false, func() {})
	a, b, c, d := mk(live, 0, "v"), mk(live, 1, "v"), mk(live, 2, "other"), mk(dead, 3, "v")
	if got := s.join([]*delivery{a, b, c, d}); len(got) != 1 || got[0] != a {
		t.Fatalf("join claims %d deliveries, want only the first (the probe)", len(got))
	}
	if s.len() != 3 {
		t.Errorf("waiting %d, want 3", s.len())
	}
	if same := s.replaying(a); len(same) != 2 || same[0] != b || same[1] != d {
		t.Errorf("replaying takes %d copies, want the two of the same payload", len(same))
	}
	s.finished(a)
	if due := s.takeDue(10, time.Now()); len(due) != 1 || due[0] != c {
		t.Fatalf("after the probe finished %d due, want the copy of another payload", len(due))
	}
	if got := s.join([]*delivery{c}); len(got) != 1 {
		t.Fatalf("the new probe is not claimed")
	}
	// A revoked parked probe hands the key on to a live copy.
	e, f := mk(live, 4, "v"), mk(live, 5, "v")
	s.join([]*delivery{e})
	s.finished(c) // c ran and ended: e is claimed next
	if due := s.takeDue(10, time.Now()); len(due) != 1 || due[0] != e {
		t.Fatalf("after c finished, due %d, want e", len(due))
	}
	s.join([]*delivery{e, f})
	e.tracker = dead
	s.park(e, time.Now().Add(time.Hour))
	s.dropRemoved(func(t *partTracker) bool { return !t.removed })
	if due := s.takeDue(10, time.Now()); len(due) != 1 || due[0] != f {
		t.Fatalf("after the probe's partition was revoked, due %d, want the live copy", len(due))
	}
}

// TestCopiesWaitBehindOwnJob: copies of a key whose job this worker runs
// wait behind it without claiming; when it completes, one claim of the next
// copy finds the result and every copy replays it.
func TestCopiesWaitBehindOwnJob(t *testing.T) {
	h := setup(t, 1)
	const key, copies = "own-held", 50
	recs := make([]*kgo.Record, copies+1)
	for i := range recs {
		recs[i] = jobRecord(t, NewJob{Type: "test.own", Key: key, Payload: []byte("p")})
	}
	h.produce(t, recs)
	rdb, claims := h.countedRedis(t, key)
	fx := newEffects()
	running, release := make(chan string, 1), make(chan struct{})
	w := h.start(t, rdb, func(w *Worker) { must(t, w.Register("test.own", blocker(fx, running, release))) })
	<-running
	testkit.Eventually(t, 30*time.Second, "every copy fetched", func() bool { return w.Stats().InFlight == copies+1 })
	if n := claims.n.Load(); n > 2 { // 1, or 2 when a clock skew made the store resend the claim
		t.Errorf("%d claims of the key while this worker runs its job; want 1 (the run's own)", n)
	}
	close(release)
	testkit.Eventually(t, 30*time.Second, "every copy replayed", func() bool { return w.Stats().Replayed == copies })
	h.waitCommitted(t, 30*time.Second)
	if n := claims.n.Load(); n > 4 {
		t.Errorf("%d claims of the key in all; want the run's and about one for the copies", n)
	}
	if n := fx.count(key); n != 1 {
		t.Errorf("the key's job ran %d times, want 1", n)
	}
}
