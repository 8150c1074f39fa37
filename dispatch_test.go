package leasehold

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/redis/go-redis/v9"
	"github.com/twmb/franz-go/pkg/kgo"
)

// Dispatch and run, table-tested over the in-memory fakeStore: every claim
// outcome and every way a run ends, with the events the observers see, the
// writes the attempt made and where the record went (finished, parked).

// dispatchBundle is what setupDispatch builds beside the worker.
type dispatchBundle struct {
	store  *fakeStore
	dlq    *fakeDeadLetters
	events *eventLog
	marked *markLog
}

// eventLog records the hooks' events in order.
type eventLog struct {
	mu sync.Mutex
	ev []string
}

func (l *eventLog) add(format string, args ...any) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.ev = append(l.ev, fmt.Sprintf(format, args...))
}

func (l *eventLog) list() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]string(nil), l.ev...)
}

func errName(err error) string {
	switch {
	case err == nil:
		return "nil"
	case errors.Is(err, ErrLeaseLost):
		return "lease_lost"
	case errors.Is(err, ErrPermanent):
		return "permanent"
	}
	return "err"
}

func (l *eventLog) hooks() Hooks {
	return Hooks{
		OnClaim:      func(_ context.Context, i ClaimInfo) { l.add("claim:%s", i.Outcome) },
		OnStart:      func(context.Context, *Job) { l.add("start") },
		OnHeartbeat:  func(context.Context, *Job, []byte) { l.add("heartbeat") },
		OnDone:       func(_ context.Context, _ *Job, res []byte, err error) { l.add("done:%s:%s", res, errName(err)) },
		OnReplay:     func(_ context.Context, _ ClaimInfo, res []byte, f string) { l.add("replay:%s:%s", res, f) },
		OnRetry:      func(_ context.Context, _ ClaimInfo, _ time.Duration, err error) { l.add("retry:%s", errName(err)) },
		OnHeld:       func(context.Context, ClaimInfo, time.Duration) { l.add("held") },
		OnLeaseLost:  func(context.Context, *Job, error) { l.add("lease_lost") },
		OnPause:      func(error) { l.add("pause") },
		OnDeadLetter: func(_ context.Context, _ ClaimInfo, reason string, _ error) { l.add("dead_letter:%s", reason) },
		OnResume:     func(time.Duration) { l.add("resume") },
	}
}

// markLog records the offsets the worker marked for commit.
type markLog struct {
	mu   sync.Mutex
	next int64 // the next offset to consume: last finished + 1
}

func (m *markLog) mark(offs map[string]map[int32]kgo.EpochOffset) {
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, ps := range offs {
		for _, eo := range ps {
			m.next = eo.Offset
		}
	}
}

func (m *markLog) get() int64 {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.next
}

// setupDispatch builds a worker over a fakeStore with the job type "t"
// bound to h: what Start builds, without Redis or Kafka (the Kafka client
// never dials; only pausing fetches touches it).
func setupDispatch(t *testing.T, h Handler, jopts ...JobOpt) (*Worker, *dispatchBundle) {
	t.Helper()
	rdb := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1"}) // never dialled: the fake store stands in
	t.Cleanup(func() { _ = rdb.Close() })
	b := &dispatchBundle{store: newFakeStore(), dlq: &fakeDeadLetters{}, events: &eventLog{}, marked: &markLog{}}
	w, err := New(rdb, WithHooks(b.events.hooks()), WithHeldBackoff(time.Millisecond, 50*time.Millisecond),
		WithRedisProbe(time.Millisecond, time.Millisecond), WithLogger(slog.New(slog.NewTextHandler(io.Discard, nil))))
	must(t, err)
	must(t, w.Register("t", h, append([]JobOpt{WithBackoff(time.Millisecond, 2*time.Millisecond), WithMaxAttempts(3)}, jopts...)...))
	cl, err := kgo.NewClient(kgo.SeedBrokers("127.0.0.1:1"))
	must(t, err)
	t.Cleanup(cl.Close)
	w.store, w.cl, w.dlq = b.store, cl, b.dlq
	w.fetch.pause, w.fetch.resume = func() { cl.PauseFetchTopics("jobs") }, func() { cl.ResumeFetchTopics("jobs") }
	w.initPool()
	w.sched = newSchedule(false, func() {})
	w.offs = newOffsets(b.marked.mark)
	w.baseCtx = context.Background()
	w.stopCtx, w.stopLoop = context.WithCancel(w.baseCtx)
	t.Cleanup(w.stopLoop)
	w.obs = w.newObservers()
	w.live = true // Stats reads the schedule
	return w, b
}

// dispatchRecord polls one record with key through accept and dispatch, as
// the loop does, and waits for a handler it started.
func dispatchRecord(t *testing.T, w *Worker, key string, offset int64) {
	t.Helper()
	must(t, w.sem.Acquire(context.Background(), 1))
	d := w.accept(&kgo.Record{Topic: "jobs", Offset: offset, Value: []byte(`{}`),
		Headers: []kgo.RecordHeader{{Key: HeaderKey, Value: []byte(key)}, {Key: HeaderType, Value: []byte("t")}}})
	if d == nil {
		t.Fatalf("record %q was not accepted", key)
	}
	if used := w.dispatch([]*delivery{d}); used == 0 {
		w.sem.Release(1)
	}
	w.running.Wait()
	w.aux.Wait() // dead-letter writers
}

func TestDispatchOutcomes(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name   string
		answer claim
		events []string
		parked int
		marked int64 // the next offset to consume afterwards: 1 when the record finished
		stats  func(Stats) int64
	}{
		{"held parks with the holder's time left", claim{Outcome: OutcomeHeld, Remaining: 5 * time.Millisecond},
			[]string{"claim:held", "held"}, 1, 0, func(s Stats) int64 { return s.Claimed[OutcomeHeld] }},
		{"duplicate replays and finishes", claim{Outcome: OutcomeDuplicate, Result: []byte("r1")},
			[]string{"claim:duplicate", "replay:r1:"}, 0, 1, func(s Stats) int64 { return s.Replayed }},
		{"duplicate of a failure replays the failure", claim{Outcome: OutcomeDuplicate, Failure: "boom"},
			[]string{"claim:duplicate", "replay::boom"}, 0, 1, func(s Stats) int64 { return s.Replayed }},
		{"a claim error parks with backoff", claim{Err: errors.New("script refused")},
			[]string{"retry:err"}, 1, 0, func(s Stats) int64 { return int64(s.Parked) }},
		{"unreachable Redis parks and pauses until it answers", claim{Err: ErrUnavailable},
			[]string{"pause", "resume"}, 1, 0, func(s Stats) int64 { return s.Pauses }},
		{"a payload reused with another key is dead-lettered", claim{Outcome: OutcomeMismatch},
			[]string{"claim:mismatch", "dead_letter:" + ReasonMismatch}, 0, 1, func(s Stats) int64 { return s.DeadLettered }},
		{"an undecodable payload is dead-lettered", claim{Outcome: OutcomeUndecodable, Err: errors.New("not JSON")},
			[]string{"dead_letter:" + ReasonUndecodable}, 0, 1, func(s Stats) int64 { return s.Claimed[OutcomeUndecodable] }},
		{"a corrupt record is dead-lettered", claim{Err: fmt.Errorf("%w: bad hash", ErrCorruptRecord)},
			[]string{"dead_letter:" + ReasonCorruptRecord}, 0, 1, func(s Stats) int64 { return s.DeadLettered }},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			w, b := setupDispatch(t, func(context.Context, *Job) ([]byte, error) {
				t.Error("the handler ran for a claim that does not run it")
				return nil, nil
			})
			b.store.pingErrs = 2
			b.store.answer("k", tc.answer, nil)
			dispatchRecord(t, w, "k", 0)
			if diff := cmp.Diff(tc.events, b.events.list()); diff != "" {
				t.Errorf("events (-want +got):\n%s", diff)
			}
			if got := w.sched.len(); got != tc.parked {
				t.Errorf("parked = %d, want %d", got, tc.parked)
			}
			if got := b.marked.get(); got != tc.marked {
				t.Errorf("next offset marked = %d, want %d", got, tc.marked)
			}
			if got := tc.stats(w.Stats()); got != 1 {
				t.Errorf("the case's counter = %d, want 1", got)
			}
		})
	}
}

func TestDispatchClaimBatchUnavailable(t *testing.T) {
	t.Parallel()
	w, b := setupDispatch(t, func(context.Context, *Job) ([]byte, error) { return nil, nil })
	b.store.batchErr, b.store.pingErrs = fmt.Errorf("dial: %w", ErrUnavailable), 1
	dispatchRecord(t, w, "k", 0)
	if diff := cmp.Diff([]string{"pause", "resume"}, b.events.list()); diff != "" {
		t.Errorf("events (-want +got):\n%s", diff)
	}
	if w.sched.len() != 1 || w.Stats().Pauses != 1 {
		t.Errorf("parked %d, pauses %d; want the record parked once and one pause", w.sched.len(), w.Stats().Pauses)
	}
}

func TestRunOutcomes(t *testing.T) {
	t.Parallel()
	type result struct {
		res []byte
		err error
	}
	cases := []struct {
		name     string
		outcome  Outcome
		attempt  func() *fakeAttempt // the attempt's answers; nil: every write succeeds
		attemptN int                 // the claim's attempt number; 0: 1
		handler  func(context.Context, *fakeAttempt) result
		events   []string
		parked   int
		marked   int64
		writes   string // completes/fails/terminal/abandoned
		counter  func(Stats) int64
	}{
		{name: "success commits and finishes", outcome: OutcomeAcquired,
			handler: func(context.Context, *fakeAttempt) result { return result{res: []byte("ok")} },
			events:  []string{"claim:acquired", "start", "done:ok:nil"}, marked: 1,
			writes: "complete=1 fail=0 terminal=false abandoned=false", counter: func(s Stats) int64 { return s.Succeeded }},
		{name: "a takeover runs like an acquire", outcome: OutcomeTakeover,
			handler: func(context.Context, *fakeAttempt) result { return result{res: []byte("ok")} },
			events:  []string{"claim:takeover", "start", "done:ok:nil"}, marked: 1,
			writes: "complete=1 fail=0 terminal=false abandoned=false", counter: func(s Stats) int64 { return s.Succeeded }},
		{name: "a commit retried while Redis is unreachable lands", outcome: OutcomeAcquired,
			attempt: func() *fakeAttempt { return &fakeAttempt{completeErrs: []error{ErrUnavailable, ErrUnavailable}} },
			handler: func(context.Context, *fakeAttempt) result { return result{res: []byte("ok")} },
			events:  []string{"claim:acquired", "start", "done:ok:nil"}, marked: 1,
			writes: "complete=3 fail=0 terminal=false abandoned=false", counter: func(s Stats) int64 { return s.Succeeded }},
		{name: "a commit refused whose write landed is a success", outcome: OutcomeAcquired,
			attempt: func() *fakeAttempt { return &fakeAttempt{completeErrs: []error{ErrLeaseLost}, landed: true} },
			handler: func(context.Context, *fakeAttempt) result { return result{res: []byte("ok")} },
			events:  []string{"claim:acquired", "start", "done:ok:nil"}, marked: 1,
			writes: "complete=1 fail=0 terminal=false abandoned=false", counter: func(s Stats) int64 { return s.Succeeded }},
		{name: "a commit refused by the fence loses the lease", outcome: OutcomeAcquired,
			attempt: func() *fakeAttempt { return &fakeAttempt{completeErrs: []error{ErrLeaseLost}} },
			handler: func(context.Context, *fakeAttempt) result { return result{res: []byte("ok")} },
			events:  []string{"claim:acquired", "start", "lease_lost", "done::lease_lost", "retry:lease_lost"}, parked: 1,
			writes: "complete=1 fail=0 terminal=false abandoned=true", counter: func(s Stats) int64 { return s.LeasesLost }},
		{name: "a lease lost while running cancels the handler", outcome: OutcomeAcquired,
			handler: func(ctx context.Context, a *fakeAttempt) result {
				a.loseLease()
				<-ctx.Done() // the job's context follows its lease's
				return result{err: context.Cause(ctx)}
			},
			events: []string{"claim:acquired", "start", "lease_lost", "done::lease_lost", "retry:lease_lost"}, parked: 1,
			writes: "complete=0 fail=0 terminal=false abandoned=true", counter: func(s Stats) int64 { return s.LeasesLost }},
		{name: "a failure is recorded and retried", outcome: OutcomeAcquired,
			handler: func(context.Context, *fakeAttempt) result { return result{err: errors.New("flaky")} },
			events:  []string{"claim:acquired", "start", "done::err", "retry:err"}, parked: 1,
			writes: "complete=0 fail=1 terminal=false abandoned=false", counter: func(s Stats) int64 { return s.Retried }},
		{name: "a failure whose record is refused abandons the lease", outcome: OutcomeAcquired,
			attempt: func() *fakeAttempt { return &fakeAttempt{failErr: ErrLeaseLost} },
			handler: func(context.Context, *fakeAttempt) result { return result{err: errors.New("flaky")} },
			events:  []string{"claim:acquired", "start", "done::err", "retry:err"}, parked: 1,
			writes: "complete=0 fail=1 terminal=false abandoned=true", counter: func(s Stats) int64 { return s.Retried }},
		{name: "a permanent failure is dead-lettered, then recorded", outcome: OutcomeAcquired,
			handler: func(context.Context, *fakeAttempt) result { return result{err: Permanent(errors.New("bad input"))} },
			events:  []string{"claim:acquired", "start", "done::permanent", "dead_letter:" + ReasonPermanent}, marked: 1,
			writes: "complete=0 fail=1 terminal=true abandoned=false", counter: func(s Stats) int64 { return s.Failed }},
		{name: "the last attempt's failure is dead-lettered", outcome: OutcomeAcquired, attemptN: 3,
			handler: func(context.Context, *fakeAttempt) result { return result{err: errors.New("flaky")} },
			events:  []string{"claim:acquired", "start", "done::err", "dead_letter:" + ReasonAttemptsExceeded}, marked: 1,
			writes: "complete=0 fail=1 terminal=true abandoned=false", counter: func(s Stats) int64 { return s.Failed }},
		{name: "an attempt past the limit does not run", outcome: OutcomeTakeover, attemptN: 4,
			handler: func(context.Context, *fakeAttempt) result { panic("ran past the limit") },
			events:  []string{"claim:takeover", "start", "done::err", "dead_letter:" + ReasonAttemptsExceeded}, marked: 1,
			writes: "complete=0 fail=1 terminal=true abandoned=false", counter: func(s Stats) int64 { return s.Failed }},
		{name: "a result too large fails for good", outcome: OutcomeAcquired,
			attempt: func() *fakeAttempt { return &fakeAttempt{completeErrs: []error{ErrResultTooLarge}} },
			handler: func(context.Context, *fakeAttempt) result { return result{res: []byte("huge")} },
			events:  []string{"claim:acquired", "start", "done::err", "dead_letter:" + ReasonResultTooLarge}, marked: 1,
			writes: "complete=1 fail=1 terminal=true abandoned=false", counter: func(s Stats) int64 { return s.Failed }},
		{name: "a terminal failure that cannot be recorded is claimed again", outcome: OutcomeAcquired,
			attempt: func() *fakeAttempt { return &fakeAttempt{failErr: ErrLeaseLost} },
			handler: func(context.Context, *fakeAttempt) result { return result{err: Permanent(errors.New("bad input"))} },
			events:  []string{"claim:acquired", "start", "retry:lease_lost"}, parked: 1,
			writes: "complete=0 fail=1 terminal=true abandoned=true", counter: func(s Stats) int64 { return int64(s.Parked) }},
		{name: "a panic is a failure", outcome: OutcomeAcquired,
			handler: func(context.Context, *fakeAttempt) result { panic("handler bug") },
			events:  []string{"claim:acquired", "start", "done::err", "retry:err"}, parked: 1,
			writes: "complete=0 fail=1 terminal=false abandoned=false", counter: func(s Stats) int64 { return s.Retried }},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			a := &fakeAttempt{}
			if tc.attempt != nil {
				a = tc.attempt()
			}
			w, b := setupDispatch(t, func(ctx context.Context, _ *Job) ([]byte, error) {
				r := tc.handler(ctx, a)
				return r.res, r.err
			})
			b.store.answer("k", claim{Outcome: tc.outcome, Fence: 7, Attempt: max(tc.attemptN, 1)}, a)
			dispatchRecord(t, w, "k", 0)
			if diff := cmp.Diff(tc.events, b.events.list()); diff != "" {
				t.Errorf("events (-want +got):\n%s", diff)
			}
			completes, failed, terminal, abandoned := a.writes()
			if got := fmt.Sprintf("complete=%d fail=%d terminal=%t abandoned=%t", completes, len(failed), terminal, abandoned); got != tc.writes {
				t.Errorf("writes %s, want %s", got, tc.writes)
			}
			if got := w.sched.len(); got != tc.parked {
				t.Errorf("parked = %d, want %d", got, tc.parked)
			}
			if got := b.marked.get(); got != tc.marked {
				t.Errorf("next offset marked = %d, want %d", got, tc.marked)
			}
			if got := tc.counter(w.Stats()); got != 1 {
				t.Errorf("the case's counter = %d, want 1", got)
			}
			if n := len(w.Running()); n != 0 {
				t.Errorf("%d jobs still listed as running", n)
			}
		})
	}
}

func TestRunHeartbeatReachesStoreAndObservers(t *testing.T) {
	t.Parallel()
	a := &fakeAttempt{}
	w, b := setupDispatch(t, func(ctx context.Context, j *Job) ([]byte, error) {
		return nil, j.Heartbeat(ctx, []byte("50%"))
	})
	b.store.answer("k", claim{Outcome: OutcomeAcquired, Fence: 1, Attempt: 1}, a)
	dispatchRecord(t, w, "k", 0)
	if diff := cmp.Diff([]string{"claim:acquired", "start", "heartbeat", "done::nil"}, b.events.list()); diff != "" {
		t.Errorf("events (-want +got):\n%s", diff)
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	if len(a.details) != 1 || string(a.details[0]) != "50%" {
		t.Errorf("details stored %q, want [50%%]", a.details)
	}
}

// TestHeartbeatThrottleOrRenewals: with the default throttle (the renew
// interval) every Heartbeat goes to the store at once, where the renewer
// coalesces them, and no job keeps a timer; with another throttle the job
// holds later details back itself, on a timer, until the interval passed.
func TestHeartbeatThrottleOrRenewals(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name  string
		ride  bool
		want  []string
		timer bool
	}{
		{"rides renewals", true, []string{"1", "2", "3"}, false},
		{"own throttle", false, []string{"1"}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			a := &fakeAttempt{}
			var timer bool
			w, b := setupDispatch(t, func(ctx context.Context, j *Job) ([]byte, error) {
				for _, d := range []string{"1", "2", "3"} {
					if err := j.Heartbeat(ctx, []byte(d)); err != nil {
						return nil, err
					}
				}
				j.hb.mu.Lock()
				timer = j.hb.timer != nil
				j.hb.mu.Unlock()
				return nil, nil
			})
			w.cfg.hbThrottle, w.hbRideRenewals = time.Hour, tc.ride
			b.store.answer("k", claim{Outcome: OutcomeAcquired, Fence: 1, Attempt: 1}, a)
			dispatchRecord(t, w, "k", 0)
			a.mu.Lock()
			defer a.mu.Unlock()
			var got []string
			for _, d := range a.details {
				got = append(got, string(d))
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("details stored (-want +got):\n%s", diff)
			}
			if timer != tc.timer {
				t.Errorf("a flush timer pending: %v, want %v", timer, tc.timer)
			}
		})
	}
}
