package leasehold

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/leasehold/leasehold/internal/testkit"
)

// Share-group mode tests run on kfake (which speaks share groups, renewals
// included) and on Apache Kafka with TEST_KAFKA=apache.

// shareOpts are the options of a share-mode test worker: the harness's, in
// the share group named after the topic.
func (h *harness) shareOpts(extra ...Opt) []Opt {
	return append([]Opt{WithShareGroup("sg-" + h.topic)}, extra...)
}

// produceJobs produces n jobs of type typ with keys prefix-0..n-1.
func (h *harness) produceJobs(t *testing.T, typ, prefix string, n int) []string {
	t.Helper()
	recs := make([]*kgo.Record, n)
	keys := make([]string, n)
	for i := range recs {
		keys[i] = fmt.Sprintf("%s-%d", prefix, i)
		recs[i] = jobRecord(t, NewJob{Type: typ, Key: keys[i], Payload: []byte(keys[i])})
	}
	h.produce(t, recs)
	return keys
}

// TestShareOneRunPerJobManyWorkers: one partition, four workers in share
// mode: every job runs once, and every worker runs some (a consumer group
// would give the partition to one of them). It prints per-worker counts and
// jobs/s beside consumer-group mode's.
func TestShareOneRunPerJobManyWorkers(t *testing.T) {
	const jobs, workers = 200, 4
	for _, mode := range []string{"share", "group"} {
		t.Run(mode, func(t *testing.T) {
			h := setup(t, 1)
			eff := newEffects()
			per := make([]atomic.Int64, workers)
			var first atomic.Int64 // when the first job ran, in Unix ns: joins are not counted
			for i := range workers {
				extra := []Opt{WithConcurrency(4)}
				if mode == "share" {
					extra = h.shareOpts(extra...)
				}
				h.start(t, h.rdb, func(w *Worker) {
					must(t, w.Register("sleep", func(_ context.Context, j *Job) ([]byte, error) {
						first.CompareAndSwap(0, time.Now().UnixNano())
						time.Sleep(20 * time.Millisecond) // a job that takes time: the workers overlap
						eff.add(j.Key)
						per[i].Add(1)
						return nil, nil
					}))
				}, extra...)
			}
			keys := h.produceJobs(t, "sleep", "k", jobs)
			testkit.Eventually(t, 90*time.Second, "every job ran", func() bool { return len(eff.snapshot()) == jobs })
			secs := time.Since(time.Unix(0, first.Load())).Seconds()
			for _, k := range keys {
				if n := eff.count(k); n != 1 {
					t.Errorf("job %s ran %d times", k, n)
				}
			}
			ran := 0
			for i := range per {
				n := per[i].Load()
				t.Logf("mode=%s worker=%d jobs=%d", mode, i, n)
				fmt.Printf("share_fairness_%s_worker%d_jobs=%d jobs\n", mode, i, n)
				if n > 0 {
					ran++
				}
			}
			fmt.Printf("share_fairness_%s_jobs_per_s=%.1f jobs/s\n", mode, float64(jobs)/secs)
			if mode == "share" && ran < workers {
				t.Errorf("%d of %d share-group workers ran jobs; want all", ran, workers)
			}
		})
	}
}

// TestShareNoAutoAcceptWhileRunning: a record whose job runs while short
// jobs arrive is never accepted by the worker's next poll (franz-go accepts
// what the last poll returned when it polls again). Worker A runs the long
// job; the short jobs go to worker B; A's client then closes (its process
// dies, as far as the broker is concerned): the long record must come back
// to B, which finds it held, then replays A's committed result. Had A polled
// again while the job ran, the record would have been accepted and B would
// never see it.
func TestShareNoAutoAcceptWhileRunning(t *testing.T) {
	h := setup(t, 1)
	eff := newEffects()
	started, release := make(chan struct{}), make(chan struct{})
	var once sync.Once
	handler := func(_ context.Context, j *Job) ([]byte, error) {
		if j.Key == "long" {
			once.Do(func() { close(started) })
			<-release
		}
		eff.add(j.Key)
		return nil, nil
	}
	var sawLong atomic.Bool
	a := h.start(t, h.rdb, func(w *Worker) { must(t, w.Register("t", handler)) }, h.shareOpts(WithConcurrency(4))...)
	h.produce(t, []*kgo.Record{jobRecord(t, NewJob{Type: "t", Key: "long"})})
	<-started
	b := h.start(t, h.rdb, func(w *Worker) { must(t, w.Register("t", handler)) },
		h.shareOpts(WithConcurrency(4), WithHooks(Hooks{OnClaim: func(_ context.Context, i ClaimInfo) {
			if i.Key == "long" {
				sawLong.Store(true)
			}
		}}))...)
	keys := h.produceJobs(t, "t", "short", 20)
	testkit.Eventually(t, 60*time.Second, "the short jobs ran", func() bool {
		for _, k := range keys {
			if eff.count(k) != 1 {
				return false
			}
		}
		return true
	})
	// The long job has run for the whole time, past several renew intervals.
	a.cl.Close() // A's connection ends: the broker releases what A holds
	testkit.Eventually(t, 60*time.Second, "the long record delivered to B", sawLong.Load)
	close(release)
	testkit.Eventually(t, 60*time.Second, "the long job completed", func() bool { return eff.count("long") == 1 })
	testkit.Eventually(t, 60*time.Second, "B replayed the long job", func() bool {
		return b.Stats().Claimed[OutcomeDuplicate] >= 1
	})
	if n := eff.count("long"); n != 1 {
		t.Fatalf("the long job ran %d times", n)
	}
}

// TestShareSagaCompensatedOnLostLeaseAndFailure is
// TestSagaCompensatedOnLostLeaseAndFailure in share-group mode: a job whose
// lease is taken away is compensated and taken over; one that fails after
// its step is compensated and released, delivered again and completed.
func TestShareSagaCompensatedOnLostLeaseAndFailure(t *testing.T) { sagaLostLeaseAndFailure(t, true) }

// TestShareDuplicatesReplayed: copies of a job (one key, one payload) in a
// share group run once; every other copy's claim finds the outcome and
// replays it, on whichever worker it lands.
func TestShareDuplicatesReplayed(t *testing.T) {
	const keys, copies = 10, 3
	h := setup(t, 1)
	eff := newEffects()
	var ws []*Worker
	for range 2 {
		ws = append(ws, h.start(t, h.rdb, func(w *Worker) {
			must(t, w.Register("t", func(_ context.Context, j *Job) ([]byte, error) {
				eff.add(j.Key)
				return []byte("r-" + j.Key), nil
			}))
		}, h.shareOpts(WithConcurrency(4))...))
	}
	var recs []*kgo.Record
	for range copies {
		for i := range keys {
			recs = append(recs, jobRecord(t, NewJob{Type: "t", Key: fmt.Sprintf("dup-%d", i), Payload: []byte("p")}))
		}
	}
	h.produce(t, recs)
	dups := func() int64 {
		var n int64
		for _, w := range ws {
			n += w.Stats().Claimed[OutcomeDuplicate]
		}
		return n
	}
	testkit.Eventually(t, 60*time.Second, "every copy replayed", func() bool {
		return len(eff.snapshot()) == keys && dups() >= keys*(copies-1)
	})
	for k, n := range eff.snapshot() {
		if n != 1 {
			t.Errorf("job %s ran %d times", k, n)
		}
	}
}

// TestShareRefusesContradictions: New refuses share-group mode with ordered
// keys or a consumer group protocol.
func TestShareRefusesContradictions(t *testing.T) {
	t.Parallel()
	rdb := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1"}) // New makes no call
	t.Cleanup(func() { _ = rdb.Close() })
	for name, o := range map[string]Opt{"ordered": WithOrderedKeys(true), "protocol": WithGroupProtocol(GroupProtocolConsumer)} {
		if _, err := New(rdb, WithShareGroup("sg"), o); err == nil {
			t.Errorf("%s: New accepted it with WithShareGroup", name)
		}
	}
	if _, err := New(rdb, WithShareGroup("sg")); err != nil {
		t.Errorf("New(WithShareGroup): %v", err)
	}
}

// TestShareLockFor: the lock is the TTL plus a third, rounded up to a
// second, never below the TTL.
func TestShareLockFor(t *testing.T) {
	t.Parallel()
	for ttl, want := range map[time.Duration]time.Duration{
		15 * time.Second: 20 * time.Second, 2 * time.Second: 3 * time.Second, time.Second: 2 * time.Second,
	} {
		if got := shareLockFor(ttl); got != want || got < ttl {
			t.Errorf("shareLockFor(%v) = %v, want %v", ttl, got, want)
		}
	}
}

// TestShareRetryBackoff: a retryable failure in share mode waits out its
// backoff before its next attempt, and the record is not lost meanwhile: it
// is held (its lock renewed) and claimed again when the backoff ends,
// instead of being released for an immediate redelivery. The handler fails
// its first attempt with RetryAfter(backoff), a backoff as long as the
// acquisition lock (3s for the harness's 2s TTL); the second attempt must
// start no sooner than the backoff after the first failed, as the second
// attempt (the Redis attempt count), and complete. Released at once, as
// before, the second attempt started within milliseconds (checked).
func TestShareRetryBackoff(t *testing.T) {
	const backoff = 3 * time.Second
	h := setup(t, 1)
	var (
		mu       sync.Mutex
		failedAt time.Time
		gap      time.Duration
		attempts []int
	)
	done := make(chan struct{})
	w := h.start(t, h.rdb, func(w *Worker) {
		must(t, w.Register("t", func(_ context.Context, j *Job) ([]byte, error) {
			mu.Lock()
			defer mu.Unlock()
			attempts = append(attempts, j.Attempt)
			if failedAt.IsZero() {
				failedAt = time.Now()
				return nil, RetryAfter(backoff, errors.New("not yet"))
			}
			gap = time.Since(failedAt)
			close(done)
			return []byte("ok"), nil
		}))
	}, h.shareOpts(WithConcurrency(2))...)
	h.produce(t, []*kgo.Record{jobRecord(t, NewJob{Type: "t", Key: "backoff"})})
	select {
	case <-done:
	case <-time.After(90 * time.Second):
		t.Fatal("the job never ran a second attempt")
	}
	testkit.Eventually(t, 30*time.Second, "the job completed", func() bool {
		return w.Stats().Succeeded == 1
	})
	mu.Lock()
	defer mu.Unlock()
	if gap < backoff {
		t.Errorf("second attempt %v after the first failed; want at least the backoff %v", gap, backoff)
	}
	if len(attempts) != 2 || attempts[1] != 2 {
		t.Errorf("attempts %v, want [1 2]", attempts)
	}
	fmt.Printf("share_retry_backoff_gap_ms=%d ms\n", gap.Milliseconds())
}

// TestShareFloodBoundedInFlight: a flood of records in share mode is held a
// poll at a time. A poll takes at most WithConcurrency records (strictly:
// kgo.ShareMaxRecordsStrict) and the next poll waits until every record of
// the last one is acknowledged, so the records a worker holds never pass
// its concurrency, whatever the backlog; the rest stay with the broker,
// available to every worker. 400 records of 4 KiB with a concurrency of
// 8, each failing its first attempt with a 300ms backoff, so that records
// park without holding a pool slot (a worker that polled for free slots
// alone would gather parked records without bound): the held count, sampled
// in every attempt, stays at 8 or under, and every job completes once.
// WithMemoryBudget's bounds are not needed in share mode: what is held is at
// most concurrency records. (With the dispatcher polling while it holds
// records, the peak was far above 8: checked.)
func TestShareFloodBoundedInFlight(t *testing.T) {
	const jobs, conc = 400, 8
	h := setup(t, 2)
	eff := newEffects()
	var peak atomic.Int64
	var w *Worker
	ready := make(chan struct{})
	w = h.start(t, h.rdb, func(wk *Worker) {
		must(t, wk.Register("t", func(_ context.Context, j *Job) ([]byte, error) {
			<-ready
			if n := int64(w.Stats().InFlight); n > peak.Load() {
				peak.Store(n) // one goroutine at a time may lose a race: the peak seen is never above the true one
			}
			if j.Attempt == 1 {
				return nil, RetryAfter(300*time.Millisecond, errors.New("later"))
			}
			eff.add(j.Key)
			return nil, nil
		}))
	}, h.shareOpts(WithConcurrency(conc))...)
	close(ready)
	payload := bytes.Repeat([]byte("x"), 4<<10)
	recs := make([]*kgo.Record, jobs)
	for i := range recs {
		recs[i] = jobRecord(t, NewJob{Type: "t", Key: fmt.Sprintf("flood-%d", i), Payload: payload})
	}
	h.produce(t, recs)
	testkit.Eventually(t, 3*time.Minute, "every job ran", func() bool { return len(eff.snapshot()) == jobs })
	for k, n := range eff.snapshot() {
		if n != 1 {
			t.Errorf("job %s ran %d times", k, n)
		}
	}
	if p := peak.Load(); p > conc || p == 0 {
		t.Errorf("records held peaked at %d; want 1 to %d (the concurrency)", p, conc)
	}
	fmt.Printf("share_flood_held_records_peak=%d records\n", peak.Load())
}

// TestShareFetchErrorsKeptAndLimited: the share client keeps retryable
// fetch errors (franz-go strips them by default, and a share session gives
// no other sign of a partition that fails to fetch), and the poll logs each
// topic, partition and kind at most once a minute, with the count it did not
// log, remembering at most fetchErrKeys of them.
func TestShareFetchErrorsKeptAndLimited(t *testing.T) {
	t.Parallel()
	w := &Worker{cfg: config{shareGroup: "sg", topics: []string{"t"}, concurrency: 4}}
	cl, err := kgo.NewClient(append(w.shareOpts(), kgo.SeedBrokers("127.0.0.1:1"))...)
	if err != nil {
		t.Fatal(err)
	}
	keep := cl.OptValue(kgo.KeepRetryableFetchErrors)
	cl.Close()
	if keep != true {
		t.Fatalf("share client KeepRetryableFetchErrors = %v, want true", keep)
	}

	var l fetchErrLog
	t0 := time.Unix(1000, 0)
	notLeader := fmt.Errorf("fetch: %w", kerr.NotLeaderForPartition)
	allow := func(p int32, err error, at time.Duration) (int, bool) { return l.allow("t", p, err, t0.Add(at)) }
	if n, ok := allow(0, notLeader, 0); !ok || n != 0 {
		t.Fatalf("first error: allowed %v, suppressed %d; want allowed, 0", ok, n)
	}
	for i := range 5 {
		if _, ok := allow(0, kerr.NotLeaderForPartition, time.Duration(i+1)*time.Second); ok {
			t.Fatalf("the same error %d s later was allowed", i+1)
		}
	}
	if _, ok := allow(1, notLeader, 2*time.Second); !ok {
		t.Fatal("another partition's error was not allowed")
	}
	if _, ok := allow(0, kerr.UnknownTopicOrPartition, 2*time.Second); !ok {
		t.Fatal("another kind of error was not allowed")
	}
	if n, ok := allow(0, notLeader, fetchErrEvery); !ok || n != 5 {
		t.Fatalf("a minute later: allowed %v, suppressed %d; want allowed, 5", ok, n)
	}
	for p := range int32(3 * fetchErrKeys) {
		allow(p, errors.New("dial tcp: connection refused"), 3*time.Second)
	}
	if n := len(l.seen); n > fetchErrKeys {
		t.Fatalf("%d errors remembered, want at most %d", n, fetchErrKeys)
	}
}

// TestShareStartWaitsForKafka: a share-mode worker started while Kafka does
// not answer waits for it, logging each try, and starts once it answers
// (before, Start failed and `worker run` exited); a start whose context
// ends first fails and says what it waited for.
func TestShareStartWaitsForKafka(t *testing.T) {
	const waiting = "kafka does not answer; the worker starts once the share group's configs are set"
	h := setup(t, 1)
	newWorker := func(t *testing.T, seed string, sink *testkit.LogSink, eff *effects) *Worker {
		t.Helper()
		w, err := New(h.rdb, h.opts(h.shareOpts(WithKafka(kgo.SeedBrokers(seed)), WithLogger(slog.New(sink)))...)...)
		if err != nil {
			t.Fatalf("New: %v", err)
		}
		must(t, w.Register("t", func(_ context.Context, j *Job) ([]byte, error) {
			eff.add(j.Key)
			return nil, nil
		}))
		return w
	}

	t.Run("starts once kafka answers", func(t *testing.T) {
		proxy := testkit.StartProxy(t, h.kafka.Brokers()[0])
		proxy.Block()
		sink, eff := &testkit.LogSink{}, newEffects()
		w := newWorker(t, proxy.Addr(), sink, eff)
		started := make(chan error, 1)
		go func() {
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
			defer cancel()
			started <- w.Start(ctx)
		}()
		t.Cleanup(func() {
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()
			_ = w.Shutdown(ctx)
		})
		testkit.Eventually(t, time.Minute, "a try logged while kafka is cut off", func() bool { return sink.Has(waiting) })
		select {
		case err := <-started:
			t.Fatalf("Start returned while kafka did not answer: %v", err)
		default:
		}
		proxy.Unblock()
		select {
		case err := <-started:
			if err != nil {
				t.Fatalf("Start after kafka answered: %v", err)
			}
		case <-time.After(time.Minute):
			t.Fatal("Start did not return within a minute of kafka answering")
		}
		keys := h.produceJobs(t, "t", "wait", 5)
		testkit.Eventually(t, time.Minute, "every job ran", func() bool { return len(eff.snapshot()) == len(keys) })
		for _, k := range keys {
			if n := eff.count(k); n != 1 {
				t.Errorf("job %s ran %d times", k, n)
			}
		}
	})

	t.Run("a start that ends first says why", func(t *testing.T) {
		proxy := testkit.StartProxy(t, h.kafka.Brokers()[0])
		proxy.Block()
		sink := &testkit.LogSink{}
		w := newWorker(t, proxy.Addr(), sink, newEffects())
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		go func() {
			// Ends the start once it waits for kafka, not before.
			for !sink.Has(waiting) && ctx.Err() == nil {
				time.Sleep(10 * time.Millisecond)
			}
			cancel()
		}()
		err := w.Start(ctx)
		if err == nil {
			_ = w.Shutdown(context.Background())
			t.Fatal("Start succeeded with kafka cut off")
		}
		if !sink.Has(waiting) || !strings.Contains(err.Error(), "waiting for kafka") {
			t.Errorf("Start: %v (waited: %v), want an error that says it waited for kafka", err, sink.Has(waiting))
		}
	})
}
