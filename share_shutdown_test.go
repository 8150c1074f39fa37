package leasehold

import (
	"context"
	"errors"
	"log/slog"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/leasehold/leasehold/inspect"
	"github.com/leasehold/leasehold/internal/deadletter"
	"github.com/leasehold/leasehold/internal/testkit"
)

// shareTestLimit is the share group's delivery count limit in the tests:
// Kafka's default, which kfake and the repository's broker keep
// (TestShareLastDeliveryDeadLettered checks that the worker reads it).
const shareTestLimit = 5

// sharePausedWarning is warnSharePaused's message.
const sharePausedWarning = "holding records of a paused job type: in share mode this worker polls no new records, " +
	"of any type, until the type is resumed"

// releaseDeliveries makes the record of key, the only one in h's topic when
// called, n deliveries old: a plain franz-go member of the worker's share
// group (whose share.auto.offset.reset it sets, as the worker would) takes
// it n times and releases it each time, then leaves. The record's next
// delivery, to the worker, is its (n+1)th. Fetching stops before the last
// release: the fetch that carries a release takes the record again, and
// the member's close would release that delivery too.
func (h *harness) releaseDeliveries(t *testing.T, key string, n int32) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	group := "sg-" + h.topic
	must(t, alterGroupConfigs(ctx, h.kafka.Client(t), group, map[string]string{"share.auto.offset.reset": "earliest"}))
	cl, err := kgo.NewClient(kgo.SeedBrokers(h.kafka.Brokers()...), kgo.ShareGroup(group), kgo.ConsumeTopics(h.topic),
		kgo.FetchMaxWait(200*time.Millisecond))
	must(t, err)
	defer cl.Close()
	for got := int32(0); got < n; {
		fs := cl.PollRecords(ctx, 1)
		if err := ctx.Err(); err != nil {
			t.Fatalf("record %s delivered %d times of %d: %v", key, got, n, err)
		}
		fs.EachRecord(func(r *kgo.Record) {
			if keyOf(r) != key {
				t.Fatalf("record %q polled, want only %q", keyOf(r), key)
			}
			if got = r.DeliveryCount(); got >= n {
				cl.PauseFetchTopics(h.topic)
			}
			r.Ack(kgo.AckRelease)
		})
		must(t, cl.FlushAcks(ctx))
	}
}

// deadLetterReasons returns the dead-letter topic's copies: key -> reason.
func (h *harness) deadLetterReasons(t *testing.T) map[string]string {
	t.Helper()
	out := make(map[string]string)
	for _, r := range h.kafka.ReadAll(t, h.dlq) {
		out[keyOf(r)] = string(headerValue(r.Headers, HeaderDLQReason))
	}
	return out
}

// deadLetterCopy returns the reason and error headers of the dead-letter
// copy of key, and whether there is one.
func (h *harness) deadLetterCopy(t *testing.T, key string) (reason, msg string, ok bool) {
	t.Helper()
	for _, r := range h.kafka.ReadAll(t, h.dlq) {
		if keyOf(r) == key {
			return string(headerValue(r.Headers, HeaderDLQReason)), string(headerValue(r.Headers, HeaderDLQError)), true
		}
	}
	return "", "", false
}

// shutdownNow shuts w down within 30 s.
func shutdownNow(t *testing.T, w *Worker) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	must(t, w.Shutdown(ctx))
}

// TestShareShutdownDeadLettersPausedLastDelivery: a share-mode worker that
// stops while it holds a record of a paused type at its last delivery (the
// group's delivery count limit) copies it to the dead-letter topic as
// delivery-limit and accepts it; one that stops holding such a record at
// its first delivery leaves it to the client's close, which releases it.
// Without the copy, the release of the record at the limit let the broker
// archive it: no trace (fails: no copy). Then the released record runs on
// the next worker once the type is resumed, and a replay brings the copied
// one back. Each worker warns once that it polls nothing while it holds a
// paused record. The two records are on topics of their own: a worker
// holding a paused record polls no more, so one poll would have to bring
// both, which the broker does not promise.
func TestShareShutdownDeadLettersPausedLastDelivery(t *testing.T) {
	ctx := t.Context()
	runs := newEffects()
	register := func(w *Worker) {
		must(t, w.Register("test.paused", func(_ context.Context, j *Job) ([]byte, error) {
			runs.add(j.Key)
			return nil, nil
		}))
	}
	// holdAndStop starts a worker on h with test.paused paused, waits for it
	// to hold the topic's one record, and stops it.
	holdAndStop := func(h *harness, in *inspect.Inspector) {
		t.Helper()
		sink := &testkit.LogSink{}
		w := h.start(t, h.rdb, register, h.shareOpts(WithConcurrency(4), WithLogger(slog.New(sink)))...)
		if w.share.limit != shareTestLimit {
			t.Fatalf("delivery count limit %d, want %d", w.share.limit, shareTestLimit)
		}
		testkit.Eventually(t, 30*time.Second, "the record held for the paused type", func() bool {
			return w.Stats().Parked == 1
		})
		shutdownNow(t, w)
		if n := sink.Count(sharePausedWarning); n != 1 {
			t.Errorf("paused-type warning logged %d times, want once", n)
		}
	}
	paused := func(h *harness) *inspect.Inspector {
		in := inspect.New(h.rdb, inspect.WithPrefix(h.prefix))
		t.Cleanup(func() { _ = in.Close(context.WithoutCancel(ctx)) })
		must(t, in.Pause(ctx, "test.paused"))
		return in
	}

	hl := setup(t, 1) // the record at its last delivery
	inl := paused(hl)
	hl.produce(t, []*kgo.Record{jobRecord(t, NewJob{Type: "test.paused", Key: "last", Payload: []byte("p")})})
	hl.releaseDeliveries(t, "last", shareTestLimit-1)
	holdAndStop(hl, inl)
	if got := hl.deadLetterReasons(t)["last"]; got != ReasonDeliveryLimit {
		t.Errorf("the record held at its last delivery: dead-letter reason %q, want %q", got, ReasonDeliveryLimit)
	}

	hf := setup(t, 1) // the record at its first delivery
	inf := paused(hf)
	hf.produce(t, []*kgo.Record{jobRecord(t, NewJob{Type: "test.paused", Key: "first", Payload: []byte("p")})})
	holdAndStop(hf, inf)
	if got, ok := hf.deadLetterReasons(t)["first"]; ok {
		t.Errorf("the record held at its first delivery was dead-lettered (%s); want it released", got)
	}
	if n := len(runs.snapshot()); n != 0 {
		t.Fatalf("%d jobs of the paused type ran", n)
	}

	for _, in := range []*inspect.Inspector{inl, inf} {
		_, err := in.Resume(ctx, "test.paused")
		must(t, err)
	}
	hf.start(t, hf.rdb, register, hf.shareOpts(WithConcurrency(4))...)
	testkit.Eventually(t, 60*time.Second, "the released record runs on the next worker", func() bool {
		return runs.count("first") == 1
	})
	next := hl.start(t, hl.rdb, register, hl.shareOpts(WithConcurrency(4))...)
	res, err := next.ReplayDeadLetters(ctx, DeadLetterFilter{Key: "last"}, false)
	must(t, err)
	if len(res) != 1 || res[0].Outcome != ReplayProduced {
		t.Fatalf("replay of the copy: %+v, want one %s", res, ReplayProduced)
	}
	testkit.Eventually(t, 60*time.Second, "the replayed record runs", func() bool { return runs.count("last") == 1 })
}

// TestShareShutdownDeadLettersHeldKeyLastDelivery: a record at its last
// delivery, parked because another worker holds its key's lease, is copied
// to the dead-letter topic when its worker stops (it was released and
// archived before: fails, no copy). The copy is a spare: the holder
// completes the key, and a replay of the copy is refused as the key's
// outcome is recorded (needs-reset), so the job does not run twice.
func TestShareShutdownDeadLettersHeldKeyLastDelivery(t *testing.T) {
	h := setup(t, 1)
	h.produce(t, []*kgo.Record{jobRecord(t, NewJob{Type: "test.held", Key: "held-last"})})
	h.releaseDeliveries(t, "held-last", shareTestLimit-1)

	holder, holding, unblock := h.startHolder(t, "test.held")
	<-holding

	w := h.start(t, h.rdb, func(w *Worker) {
		must(t, w.Register("test.held", func(context.Context, *Job) ([]byte, error) {
			t.Error("the key ran on a second worker while held")
			return nil, nil
		}))
	}, h.shareOpts()...)
	testkit.Eventually(t, 30*time.Second, "the record parked for the held key", func() bool {
		s := w.Stats()
		return s.Claimed[OutcomeHeld] > 0 && s.Parked == 1
	})
	shutdownNow(t, w)
	if got := h.deadLetterReasons(t)["held-last"]; got != ReasonDeliveryLimit {
		t.Fatalf("the record held at its last delivery: dead-letter reason %q, want %q", got, ReasonDeliveryLimit)
	}

	unblock()
	testkit.Eventually(t, 30*time.Second, "the holder completed the key", func() bool {
		return holder.Stats().Succeeded == 1
	})
	res, err := holder.ReplayDeadLetters(t.Context(), DeadLetterFilter{Key: "held-last"}, true)
	must(t, err)
	if len(res) != 1 || res[0].Outcome != ReplayNeedsReset {
		t.Fatalf("replay of the spare copy: %+v, want one %s", res, ReplayNeedsReset)
	}
}

// TestShareShutdownDeadLettersRunningLastDelivery: a job at its record's
// last delivery whose handler ignores the drain's cancellation is still
// running when its worker stops. Its record is copied to the dead-letter
// topic (delivery-limit, the cause saying the job still ran) and accepted;
// before, the client's close released it and the broker archived it, with
// no trace, though the attempt never landed (fails: no copy). The attempt
// returns after the stop, too late to commit, and a replay of the copy runs
// the key again, to completion.
func TestShareShutdownDeadLettersRunningLastDelivery(t *testing.T) {
	h := setup(t, 1)
	h.produce(t, []*kgo.Record{jobRecord(t, NewJob{Type: "t", Key: "stuck"})})
	h.releaseDeliveries(t, "stuck", shareTestLimit-1)
	var done atomic.Int32
	entered, release := make(chan struct{}), make(chan struct{})
	register := func(w *Worker) {
		must(t, w.Register("t", func(context.Context, *Job) ([]byte, error) {
			select {
			case <-entered: // a later run: the replay's
			default:
				close(entered)
				<-release // ignores its context's cancellation
			}
			done.Add(1)
			return nil, nil
		}))
	}
	w := h.start(t, h.rdb, register, h.shareOpts(WithShutdownTimeout(200*time.Millisecond))...)
	select {
	case <-entered:
	case <-time.After(30 * time.Second):
		t.Fatal("the job did not start")
	}
	ctx, cancel := context.WithTimeout(t.Context(), time.Second)
	defer cancel()
	if err := w.Shutdown(ctx); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Shutdown with a handler ignoring its cancellation: %v, want the drain's deadline", err)
	}
	reason, msg, ok := h.deadLetterCopy(t, "stuck")
	if !ok {
		t.Fatal("the record of the job running at its last delivery was not dead-lettered")
	}
	if reason != ReasonDeliveryLimit || !strings.Contains(msg, "still running") {
		t.Errorf("copy of the running job's record: reason %q, error %q; want %q, still running", reason, msg,
			ReasonDeliveryLimit)
	}
	close(release)
	testkit.Eventually(t, 30*time.Second, "the stopped worker's attempt returned", func() bool {
		return done.Load() == 1
	})

	next := h.start(t, h.rdb, register, h.shareOpts()...)
	res, err := next.ReplayDeadLetters(t.Context(), DeadLetterFilter{Key: "stuck"}, false)
	must(t, err)
	if len(res) != 1 || res[0].Outcome != ReplayProduced {
		t.Fatalf("replay of the copy: %+v, want one %s", res, ReplayProduced)
	}
	testkit.Eventually(t, 60*time.Second, "the replayed record ran to completion", func() bool {
		return next.Stats().Succeeded == 1
	})
}

// cutShortWriter is a dead-letter writer whose first Write waits until its
// context ends and fails, as a copy that Kafka or Redis holds up until the
// worker stops; later Writes go to the worker's writer.
type cutShortWriter struct {
	deadLetterWriter
	entered chan struct{} // closed when the first Write waits
	cut     atomic.Bool
}

// Write fails the first call when ctx ends and passes the others on.
func (c *cutShortWriter) Write(ctx context.Context, orig *kgo.Record, reason string, cause error) (deadletter.Result, error) {
	if c.cut.CompareAndSwap(false, true) {
		close(c.entered)
		<-ctx.Done()
		return 0, context.Cause(ctx)
	}
	return c.deadLetterWriter.Write(ctx, orig, reason, cause)
}

// TestShareShutdownDeadLettersFailureCutShort: a job failing at its last
// delivery whose dead-letter copy the worker's stop cuts short (the copy's
// retries end with the stop) is still dead-lettered, as the failure it was
// (attempts-exhausted, with the handler's error): shutdown writes the copy
// decided for it before the client's close would release the record to be
// archived. Fails without: no copy; and with the delivery-limit reason had
// the decision not been kept.
func TestShareShutdownDeadLettersFailureCutShort(t *testing.T) {
	h := setup(t, 1)
	h.produce(t, []*kgo.Record{jobRecord(t, NewJob{Type: "t", Key: "cut"})})
	h.releaseDeliveries(t, "cut", shareTestLimit-1)
	var attempts atomic.Int32
	release := make(chan struct{})
	w := h.start(t, h.rdb, func(w *Worker) {
		must(t, w.Register("t", func(context.Context, *Job) ([]byte, error) {
			attempts.Add(1)
			<-release
			return nil, errors.New("boom")
		}, WithMaxAttempts(50)))
	}, h.shareOpts()...)
	cut := &cutShortWriter{deadLetterWriter: w.dlq, entered: make(chan struct{})}
	w.dlq = cut // read by the job's settle, after release is closed
	close(release)
	select {
	case <-cut.entered:
	case <-time.After(30 * time.Second):
		t.Fatal("the failure was not dead-lettered")
	}
	shutdownNow(t, w)
	if n := attempts.Load(); n != 1 {
		t.Fatalf("%d attempts, want 1", n)
	}
	reason, msg, ok := h.deadLetterCopy(t, "cut")
	if !ok {
		t.Fatal("the failure at the last delivery was not dead-lettered")
	}
	if reason != ReasonAttemptsExceeded || !strings.Contains(msg, "boom") {
		t.Errorf("copy of the failure: reason %q, error %q; want %q with the handler's error", reason, msg,
			ReasonAttemptsExceeded)
	}
}

// TestSharePauseWarnedOncePerPause: a share-mode worker that holds records
// of a paused type warns once per pause that it polls nothing meanwhile,
// not once per record or per look at them; a new pause of the type warns
// again, and a consumer-group worker, whose polls go on, does not warn.
func TestSharePauseWarnedOncePerPause(t *testing.T) {
	t.Parallel()
	sink := &testkit.LogSink{}
	w := &Worker{log: slog.New(sink), sched: newSchedule(false, func() {}), pauseEvery: time.Second,
		share: &shareState{round: make(map[*kgo.Record]*delivery)}}
	batch := func() []*delivery {
		return []*delivery{{rec: &kgo.Record{}, typ: "t.paused"}, {rec: &kgo.Record{}, typ: "t.paused"},
			{rec: &kgo.Record{}, typ: "t.other"}}
	}
	paused := time.UnixMilli(1_000_000)
	w.typesPaused.Store(&pausedSet{"t.paused": paused})
	for range 3 { // the first batch, then the held records' looks again
		if kept := w.holdPaused(batch()); len(kept) != 1 {
			t.Fatalf("holdPaused kept %d records, want the other type's 1", len(kept))
		}
	}
	if n := sink.Count(sharePausedWarning); n != 1 {
		t.Fatalf("warned %d times for one pause, want once", n)
	}
	w.typesPaused.Store(&pausedSet{"t.paused": paused.Add(time.Minute)}) // resumed, then paused again
	w.holdPaused(batch())
	if n := sink.Count(sharePausedWarning); n != 2 {
		t.Fatalf("warned %d times for two pauses, want twice", n)
	}
	w.share = nil
	w.typesPaused.Store(&pausedSet{"t.paused": paused.Add(2 * time.Minute)})
	w.holdPaused(batch())
	if n := sink.Count(sharePausedWarning); n != 2 {
		t.Fatalf("a consumer-group worker warned (%d warnings, want the 2 before)", n)
	}
}
