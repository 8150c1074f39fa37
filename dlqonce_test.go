package leasehold

import (
	"context"
	"errors"
	"log/slog"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/leasehold/leasehold/internal/testkit"
	"github.com/leasehold/leasehold/lease"
)

// dlqCase is one test's setup for dead-lettering a record that has no
// idempotency key: a jobs topic, a dead-letter topic with three partitions
// holding unrelated dead letters (decoys), and the poison record as read
// back from Kafka (with its topic, partition and offset) and its topic's
// origin (cluster and topic ID).
type dlqCase struct {
	h      *harness
	orig   *kgo.Record
	origin recordOrigin
	cl     *kgo.Client    // manual partitioner: records go to rec.Partition
	m      *lease.Manager // the other worker's, for its lock (see lock)
	marker string
	decoys int
}

func setupDLQCase(t *testing.T) *dlqCase {
	t.Helper()
	h := setup(t, 1)
	h.dlq = h.kafka.Topic(t, "jobs-dlq", 3)
	h.produce(t, []*kgo.Record{{Key: []byte("poison"), Value: []byte("no key header"),
		Headers: []kgo.RecordHeader{{Key: HeaderType, Value: []byte("test.op")}}}})
	recs := h.kafka.ReadAll(t, h.topic)
	if len(recs) != 1 {
		t.Fatalf("jobs topic holds %d records, want 1", len(recs))
	}
	origin, err := fetchOrigin(t.Context(), h.kafka.Client(t), h.topic)
	must(t, err)
	c := &dlqCase{
		h:      h,
		orig:   recs[0],
		origin: origin,
		cl:     h.kafka.Client(t, kgo.RecordPartitioner(kgo.ManualPartitioner())),
		marker: deadLetterMarkerKey(h.prefix, h.dlq, origin, recs[0]),
	}
	c.produceDecoys(t)
	return c
}

// produceDecoys writes, to every partition of the dead-letter topic, copies
// of other records: same topic other offset, same offset other partition,
// same partition and offset of another topic, and same topic, partition and
// offset of an earlier topic of the same name (another topic ID) or of
// another cluster.
func (c *dlqCase) produceDecoys(t *testing.T) {
	t.Helper()
	earlier, otherCluster := c.origin, c.origin
	earlier.topicID[0]++
	otherCluster.cluster += "-other"
	others := []struct {
		r *kgo.Record
		o recordOrigin
	}{
		{&kgo.Record{Topic: c.orig.Topic, Partition: c.orig.Partition, Offset: c.orig.Offset + 1}, c.origin},
		{&kgo.Record{Topic: c.orig.Topic, Partition: c.orig.Partition + 1, Offset: c.orig.Offset}, c.origin},
		{&kgo.Record{Topic: c.orig.Topic + "-other", Partition: c.orig.Partition, Offset: c.orig.Offset}, c.origin},
		{c.orig, earlier},
		{c.orig, otherCluster},
	}
	for p := range int32(3) {
		for _, o := range others {
			rec := withOrigin(deadLetterRecord(c.h.dlq, o.r, ReasonPermanent, errors.New("decoy")), o.o)
			rec.Partition = p
			must(t, produceDeadLetter(t.Context(), c.cl, rec))
			c.decoys++
		}
	}
}

// crashedAttempt does what a worker does before it dies in the middle of
// dead-lettering: under the record's lock it opens the marker's produce
// window (the marker is then pending) and, with produce, writes the copy (to
// partition 2) without setting the marker to done; without produce, only
// decoys land after the window opened. The lock is then let go
// and the window is closed (length zero), as they are once a dead worker's
// lease has expired.
func (c *dlqCase) crashedAttempt(t *testing.T, produce bool) {
	t.Helper()
	l := c.lock(t)
	c.stamp(t, l, 0)
	if produce {
		c.produceCopy(t)
	} else {
		// Copies with the record's coordinates but of an earlier topic of
		// the same name, or of another cluster, lie where the scan looks:
		// they are not the record's copy.
		c.produceDecoys(t)
	}
	must(t, l.Release(t.Context()))
}

// lock takes the record's dead-letter lock, as another worker would.
func (c *dlqCase) lock(t *testing.T) *lease.Lease {
	t.Helper()
	if c.m == nil {
		m, err := lease.NewManager(c.h.rdb, lease.WithPrefix(c.h.prefix), lease.WithTTL(2*time.Second))
		must(t, err)
		must(t, m.Start(t.Context()))
		t.Cleanup(func() { _ = m.Shutdown(context.Background()) })
		c.m = m
	}
	l, err := c.m.Acquire(t.Context(), deadLetterID(c.h.dlq, c.origin, c.orig))
	must(t, err)
	return l
}

// stamp opens a produce window of length window on the marker under the
// lock l, as a worker does right before it produces the copy.
func (c *dlqCase) stamp(t *testing.T, l *lease.Lease, window time.Duration) {
	t.Helper()
	from, err := listDLQOffsets(t.Context(), c.cl, c.h.dlq, true)
	must(t, err)
	done, err := stampDeadLetter(t.Context(), c.m, l, c.marker, from, window, time.Hour)
	must(t, err)
	if done {
		t.Fatal("marker already done")
	}
}

func (c *dlqCase) produceCopy(t *testing.T) {
	t.Helper()
	rec := withOrigin(deadLetterRecord(c.h.dlq, c.orig, ReasonMissingKey, errors.New("no key")), c.origin)
	rec.Partition = 2
	must(t, produceDeadLetter(t.Context(), c.cl, rec))
}

// read counts the copies of the poison record and the other records in the
// dead-letter topic.
func (c *dlqCase) read(t *testing.T) (copies, others int) {
	t.Helper()
	want := []string{c.origin.cluster, c.origin.topicIDString(), c.orig.Topic, strconv.Itoa(int(c.orig.Partition)),
		strconv.FormatInt(c.orig.Offset, 10)}
	for _, r := range c.h.kafka.ReadAll(t, c.h.dlq) {
		got := []string{string(headerValue(r.Headers, HeaderDLQCluster)), string(headerValue(r.Headers, HeaderDLQTopicID)),
			string(headerValue(r.Headers, HeaderDLQTopic)),
			string(headerValue(r.Headers, HeaderDLQPartition)), string(headerValue(r.Headers, HeaderDLQOffset))}
		if strings.Join(got, "/") == strings.Join(want, "/") {
			copies++
		} else {
			others++
		}
	}
	return copies, others
}

func (c *dlqCase) markerState(t *testing.T) dlqMarkerState {
	t.Helper()
	st, _, _, err := readDeadLetterMarker(t.Context(), c.h.rdb, c.marker)
	must(t, err)
	return st
}

func (c *dlqCase) start(t *testing.T, rdb redis.UniversalClient, extra ...Opt) *Worker {
	t.Helper()
	return c.h.start(t, rdb, func(w *Worker) {
		must(t, w.Register("test.op", func(context.Context, *Job) ([]byte, error) {
			t.Error("a record without a key reached the handler")
			return nil, nil
		}))
	}, extra...)
}

// committed returns the group's committed offset of the poison record's
// partition (0 before the group exists).
func (c *dlqCase) committed(t *testing.T) int64 {
	t.Helper()
	return c.h.kafka.Committed(t, c.h.group, c.orig.Topic)[c.orig.Partition]
}

// waitFinished waits until the poison record is committed.
func (c *dlqCase) waitFinished(t *testing.T) {
	t.Helper()
	testkit.Eventually(t, 30*time.Second, "the poison record committed", func() bool { return c.committed(t) > c.orig.Offset })
}

// notFinished checks, for hold, that the poison record is neither
// dead-lettered nor committed.
func (c *dlqCase) notFinished(t *testing.T, hold time.Duration, why string) {
	t.Helper()
	deadline := time.Now().Add(hold)
	for time.Now().Before(deadline) {
		if n := c.committed(t); n > c.orig.Offset {
			t.Fatalf("%s: the poison record was committed (offset %d)", why, n)
		}
		time.Sleep(100 * time.Millisecond)
	}
	if copies, _ := c.read(t); copies != 0 {
		t.Fatalf("%s: %d copies written", why, copies)
	}
}

// TestDeadLetterOnceAcrossCrash redelivers a poison record after a worker
// died in the middle of dead-lettering it, or after it finished without its
// offset being committed. The dead-letter topic (three partitions, with other
// dead letters around the copy) must end with exactly one copy, the record
// must be committed, and only a worker that wrote the copy counts it.
func TestDeadLetterOnceAcrossCrash(t *testing.T) {
	for _, tc := range []struct {
		name        string
		before      func(t *testing.T, c *dlqCase)
		wantCounted int64
	}{
		{
			// The crash fell between the produce and the "done" marker.
			name:   "pending marker, copy written",
			before: func(t *testing.T, c *dlqCase) { c.crashedAttempt(t, true) },
		},
		{
			// The crash fell between the pending marker and the produce.
			name:        "pending marker, no copy",
			before:      func(t *testing.T, c *dlqCase) { c.crashedAttempt(t, false) },
			wantCounted: 1,
		},
		{
			// The copy and its done marker were written; only the offset
			// commit was lost.
			name: "done marker",
			before: func(t *testing.T, c *dlqCase) {
				c.crashedAttempt(t, true)
				must(t, setDeadLetterDone(t.Context(), c.h.rdb, c.marker, time.Hour))
			},
		},
		{
			name:        "no marker",
			before:      func(*testing.T, *dlqCase) {},
			wantCounted: 1,
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := setupDLQCase(t)
			tc.before(t, c)
			_, decoysBefore := c.read(t)
			w := c.start(t, c.h.rdb)
			c.waitFinished(t)

			copies, others := c.read(t)
			if copies != 1 {
				t.Errorf("dead-letter topic holds %d copies of the poison record, want 1", copies)
			}
			if others != decoysBefore {
				t.Errorf("dead-letter topic holds %d other records, want the %d decoys", others, c.decoys)
			}
			if st := c.markerState(t); st != dlqDone {
				t.Errorf("marker state %d, want done (%d)", st, dlqDone)
			}
			if got := w.Stats().DeadLettered; got != tc.wantCounted {
				t.Errorf("worker counted %d dead letters, want %d", got, tc.wantCounted)
			}
		})
	}
}

// TestDeadLetterWaitsForLockHolder: while another worker holds the
// dead-letter lock of a record, a worker that gets the same record (a
// rebalance) writes nothing and does not finish the record, neither while
// the holder's marker is pending nor after the holder's copy landed; once the
// holder marks it done and lets go, the record is finished without a second
// copy.
func TestDeadLetterWaitsForLockHolder(t *testing.T) {
	c := setupDLQCase(t)
	ctx := t.Context()
	l := c.lock(t)

	logs := &logSink{}
	w := c.start(t, c.h.rdb, WithLogger(slog.New(logs)))
	testkit.Eventually(t, 20*time.Second, "the worker to find the lock held", func() bool {
		return logs.has("dead-letter lock held by another worker")
	})
	c.notFinished(t, time.Second, "lock held, no marker")

	c.stamp(t, l, 0) // the holder opens its produce window: the marker is pending
	c.notFinished(t, time.Second, "lock held, marker pending")

	c.produceCopy(t)
	time.Sleep(time.Second)
	if copies, _ := c.read(t); copies != 1 {
		t.Fatalf("lock held, holder's copy written: %d copies, want 1", copies)
	}
	if n := c.committed(t); n > c.orig.Offset {
		t.Fatalf("lock held, holder's copy written: the record was committed before the holder marked it done")
	}

	must(t, setDeadLetterDone(ctx, c.h.rdb, c.marker, time.Hour))
	must(t, l.Release(ctx))
	c.waitFinished(t)
	if copies, _ := c.read(t); copies != 1 {
		t.Errorf("dead-letter topic holds %d copies, want 1", copies)
	}
	if got := w.Stats().DeadLettered; got != 0 {
		t.Errorf("worker counted %d dead letters, want 0 (the holder wrote the copy)", got)
	}
}

// TestDeadLetterWaitsOutProduceWindow: a holder opens its produce window and
// loses the lock with its copy still in flight; the copy lands inside the
// window, after the next holder has taken the lock and read the pending
// marker. The next holder waits for the window to close before it looks for
// the copy, finds it, and writes none.
func TestDeadLetterWaitsOutProduceWindow(t *testing.T) {
	c := setupDLQCase(t)
	const window = 5 * time.Second
	l := c.lock(t)
	c.stamp(t, l, window)
	opened := time.Now()
	must(t, l.Release(t.Context())) // the lock is gone; the holder's produce is not

	logs := &logSink{}
	w := c.start(t, c.h.rdb, WithLogger(slog.New(logs)))
	testkit.Eventually(t, 20*time.Second, "the worker to wait for the open window", func() bool {
		return logs.has("dead-letter marker pending: waiting for the earlier attempt's produce window to close")
	})
	time.Sleep(time.Until(opened.Add(window / 2)))
	c.produceCopy(t) // the in-flight copy lands, inside its window
	c.waitFinished(t)
	if copies, _ := c.read(t); copies != 1 {
		t.Errorf("dead-letter topic holds %d copies, want 1", copies)
	}
	if st := c.markerState(t); st != dlqDone {
		t.Errorf("marker state %d, want done (%d)", st, dlqDone)
	}
	if got := w.Stats().DeadLettered; got != 0 {
		t.Errorf("worker counted %d dead letters, want 0 (the earlier holder wrote the copy)", got)
	}
}

// TestDeadLetterRedisUnreachable: dead-lettering fails closed. With Redis
// stopped (SIGSTOP) the worker writes no copy and does not finish the record;
// once Redis answers again it writes exactly one.
func TestDeadLetterRedisUnreachable(t *testing.T) {
	h := setup(t, 1)
	h.dlq = h.kafka.Topic(t, "jobs-dlq", 3)
	srv := testkit.StartRedis(t)
	opt := srv.Options()
	opt.DialTimeout, opt.ReadTimeout, opt.WriteTimeout = 200*time.Millisecond, 300*time.Millisecond, 300*time.Millisecond
	rdb := redis.NewClient(opt)
	t.Cleanup(func() { _ = rdb.Close() })
	c := &dlqCase{h: h}
	h.rdb = rdb

	logs := &logSink{}
	w := c.start(t, rdb, WithLogger(slog.New(logs)))
	srv.Pause()
	resumed := false
	defer func() {
		if !resumed {
			srv.Resume()
		}
	}()
	h.produce(t, []*kgo.Record{{Key: []byte("poison"), Value: []byte("no key header"),
		Headers: []kgo.RecordHeader{{Key: HeaderType, Value: []byte("test.op")}}}})
	c.orig = &kgo.Record{Topic: h.topic, Partition: 0, Offset: 0}
	origin, err := fetchOrigin(t.Context(), h.kafka.Client(t), h.topic)
	must(t, err)
	c.origin = origin
	testkit.Eventually(t, 20*time.Second, "a dead-letter attempt to fail on Redis", func() bool {
		return logs.has("dead-letter lock not taken")
	})
	c.notFinished(t, 1500*time.Millisecond, "Redis stopped")

	srv.Resume()
	resumed = true
	c.waitFinished(t)
	if copies, _ := c.read(t); copies != 1 {
		t.Errorf("dead-letter topic holds %d copies, want 1", copies)
	}
	if got := w.Stats().DeadLettered; got != 1 {
		t.Errorf("worker counted %d dead letters, want 1", got)
	}
}

// TestDeadLetterOffsetsRoundTrip: the offsets stored in a pending marker read
// back as written; a damaged value reads as "from the log start".
func TestDeadLetterOffsetsRoundTrip(t *testing.T) {
	for _, offs := range []map[int32]int64{{}, {0: 0}, {0: 12, 1: 7, 10: 1 << 40}} {
		s := formatDLQOffsets(offs)
		got := parseDLQOffsets(s)
		if len(got) != len(offs) {
			t.Fatalf("%q parsed to %v, want %v", s, got, offs)
		}
		for p, o := range offs {
			if got[p] != o {
				t.Fatalf("%q parsed to %v, want %v", s, got, offs)
			}
		}
	}
	for _, bad := range []string{"0", "0=x", "x=1", "0=1,", "99999999999=1"} {
		if got := parseDLQOffsets(bad); got != nil {
			t.Errorf("parseDLQOffsets(%q) = %v, want nil", bad, got)
		}
	}
}

// logSink is a slog handler that keeps every message, at every level.
type logSink struct {
	mu   sync.Mutex
	msgs []string
}

func (s *logSink) Enabled(context.Context, slog.Level) bool { return true }

func (s *logSink) Handle(_ context.Context, r slog.Record) error {
	s.mu.Lock()
	s.msgs = append(s.msgs, r.Message)
	s.mu.Unlock()
	return nil
}

func (s *logSink) WithAttrs([]slog.Attr) slog.Handler { return s }
func (s *logSink) WithGroup(string) slog.Handler      { return s }

func (s *logSink) has(msg string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, m := range s.msgs {
		if m == msg {
			return true
		}
	}
	return false
}
