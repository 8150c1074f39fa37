package leasehold

import (
	"context"
	"log/slog"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/leasehold/leasehold/internal/testkit"
)

// The exactly-once protocol itself (markers, locks, produce windows, scans)
// is tested without a worker in internal/deadletter; these tests check what
// the worker does around it: the record is finished only once its copy
// exists, and only the worker that wrote the copy counts it.

// poisonCase is one test's poison record: a record without an idempotency
// key, in a jobs topic, dead-lettered to a topic with three partitions.
type poisonCase struct {
	h    *harness
	orig *kgo.Record // with its topic, partition and offset once produced
}

func setupPoison(t *testing.T) *poisonCase {
	t.Helper()
	h := setup(t, 1)
	h.dlq = h.kafka.Topic(t, "jobs-dlq", 3)
	return &poisonCase{h: h, orig: &kgo.Record{Topic: h.topic, Partition: 0, Offset: 0}}
}

func (c *poisonCase) produce(t *testing.T) {
	t.Helper()
	c.h.produce(t, []*kgo.Record{{Key: []byte("poison"), Value: []byte("no key header"),
		Headers: []kgo.RecordHeader{{Key: HeaderType, Value: []byte("test.op")}}}})
}

func (c *poisonCase) start(t *testing.T, rdb redis.UniversalClient, extra ...Opt) *Worker {
	t.Helper()
	return c.h.start(t, rdb, func(w *Worker) {
		must(t, w.Register("test.op", func(context.Context, *Job) ([]byte, error) {
			t.Error("a record without a key reached the handler")
			return nil, nil
		}))
	}, extra...)
}

// copies counts the poison record's copies in the dead-letter topic.
func (c *poisonCase) copies(t *testing.T) int {
	t.Helper()
	n := 0
	for _, r := range c.h.kafka.ReadAll(t, c.h.dlq) {
		if string(headerValue(r.Headers, HeaderDLQTopic)) == c.orig.Topic &&
			string(headerValue(r.Headers, HeaderDLQPartition)) == "0" &&
			string(headerValue(r.Headers, HeaderDLQOffset)) == "0" {
			n++
		}
	}
	return n
}

// committed returns the group's committed offset of the poison record's
// partition (0 before the group exists).
func (c *poisonCase) committed(t *testing.T) int64 {
	t.Helper()
	return c.h.kafka.Committed(t, c.h.group, c.orig.Topic)[c.orig.Partition]
}

// waitFinished waits until the poison record is committed.
func (c *poisonCase) waitFinished(t *testing.T) {
	t.Helper()
	testkit.Eventually(t, 30*time.Second, "the poison record committed", func() bool { return c.committed(t) > c.orig.Offset })
}

// notFinished checks, for hold, that the poison record is neither
// dead-lettered nor committed.
func (c *poisonCase) notFinished(t *testing.T, hold time.Duration, why string) {
	t.Helper()
	deadline := time.Now().Add(hold)
	for time.Now().Before(deadline) {
		if n := c.committed(t); n > c.orig.Offset {
			t.Fatalf("%s: the poison record was committed (offset %d)", why, n)
		}
		time.Sleep(100 * time.Millisecond)
	}
	if copies := c.copies(t); copies != 0 {
		t.Fatalf("%s: %d copies written", why, copies)
	}
}

// TestDeadLetterRedeliveredAfterCrash: a worker dead-letters a poison record
// and dies before its offset is committed; the record is delivered again to
// the next worker, which finds the copy, writes no second one, does not
// count it, and commits the record.
func TestDeadLetterRedeliveredAfterCrash(t *testing.T) {
	c := setupPoison(t)
	c.produce(t)
	crashOpt, crashed := crashable()
	w1 := c.start(t, c.h.rdb, WithCommitInterval(time.Hour), crashOpt) // nothing committed before the crash
	testkit.Eventually(t, 30*time.Second, "the first worker to dead-letter the record", func() bool {
		return w1.Stats().DeadLettered == 1
	})
	crash(t, w1, crashed)
	if n := c.committed(t); n > c.orig.Offset {
		t.Fatalf("the crashed worker committed the poison record (offset %d)", n)
	}

	w2 := c.start(t, c.h.rdb)
	c.waitFinished(t)
	if copies := c.copies(t); copies != 1 {
		t.Errorf("dead-letter topic holds %d copies of the poison record, want 1", copies)
	}
	if got := w2.Stats().DeadLettered; got != 0 {
		t.Errorf("second worker counted %d dead letters, want 0 (the first wrote the copy)", got)
	}
}

// TestDeadLetterRedisUnreachable: dead-lettering fails closed. With Redis
// stopped (SIGSTOP) the worker writes no copy and does not finish the record;
// once Redis answers again it writes exactly one.
func TestDeadLetterRedisUnreachable(t *testing.T) {
	c := setupPoison(t)
	srv := testkit.StartRedis(t)
	opt := srv.Options()
	opt.DialTimeout, opt.ReadTimeout, opt.WriteTimeout = 200*time.Millisecond, 300*time.Millisecond, 300*time.Millisecond
	rdb := redis.NewClient(opt)
	t.Cleanup(func() { _ = rdb.Close() })
	c.h.rdb = rdb

	logs := &testkit.LogSink{}
	w := c.start(t, rdb, WithLogger(slog.New(logs)))
	srv.Pause()
	resumed := false
	defer func() {
		if !resumed {
			srv.Resume()
		}
	}()
	c.produce(t)
	testkit.Eventually(t, 20*time.Second, "a dead-letter attempt to fail on Redis", func() bool {
		return logs.Has("dead-letter lock not taken")
	})
	c.notFinished(t, 1500*time.Millisecond, "Redis stopped")

	srv.Resume()
	resumed = true
	c.waitFinished(t)
	if copies := c.copies(t); copies != 1 {
		t.Errorf("dead-letter topic holds %d copies, want 1", copies)
	}
	if got := w.Stats().DeadLettered; got != 1 {
		t.Errorf("worker counted %d dead letters, want 1", got)
	}
}
