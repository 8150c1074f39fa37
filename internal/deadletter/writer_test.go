package deadletter

import (
	"context"
	"crypto/rand"
	"errors"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/leasehold/leasehold/internal/testkit"
)

// TestWrite: the first Write writes the copy and marks it done; a second
// Write of the same record finds the marker and writes nothing.
func TestWrite(t *testing.T) {
	t.Parallel()
	c := setup(t)
	w := c.writer(t, nil)
	if res := c.write(t, w); res != Written {
		t.Fatalf("first Write: %v, want %v", res, Written)
	}
	if st := c.markerState(t); st != done {
		t.Errorf("marker state %d, want done (%d)", st, done)
	}
	if res := c.write(t, w); res != AlreadyWritten {
		t.Errorf("second Write: %v, want %v", res, AlreadyWritten)
	}
	copies, others := c.read(t)
	if copies != 1 || others != c.decoys {
		t.Errorf("dead-letter topic holds %d copies and %d other records, want 1 and the %d decoys", copies, others, c.decoys)
	}
	r := c.kafka.ReadAll(t, c.dlq)
	for _, rec := range r {
		if v, _ := header(rec.Headers, HeaderReason); string(v) != ReasonMissingKey {
			continue
		}
		if string(rec.Value) != "poison" {
			t.Errorf("copy value %q, want the original's", rec.Value)
		}
		if v, _ := header(rec.Headers, HeaderType); string(v) != "test.op" {
			t.Errorf("copy lost the original's %s header", HeaderType)
		}
		if v, _ := header(rec.Headers, HeaderError); string(v) != "no key" {
			t.Errorf("copy's %s = %q, want the cause", HeaderError, v)
		}
	}
}

// TestWriteAfterLostAnswer: a Write's copy landed but its marker was left
// pending (the answer to its produce was lost, or it died before "done"),
// with the produce window closed. The next Write scans the dead-letter
// topic, finds the copy and writes no second one.
func TestWriteAfterLostAnswer(t *testing.T) {
	t.Parallel()
	c := setup(t)
	w := c.writer(t, nil)
	from, err := EndOffsets(t.Context(), c.cl, c.dlq)
	must(t, err)
	if res := c.write(t, w); res != Written {
		t.Fatalf("first Write: %v, want %v", res, Written)
	}
	must(t, c.rdb.Set(t.Context(), c.marker, markerPending+"0;"+formatOffsets(from), time.Hour).Err())
	if res := c.write(t, c.writer(t, nil)); res != AlreadyWritten {
		t.Errorf("Write after the lost answer: %v, want %v", res, AlreadyWritten)
	}
	if copies, _ := c.read(t); copies != 1 {
		t.Errorf("dead-letter topic holds %d copies, want 1", copies)
	}
	if st := c.markerState(t); st != done {
		t.Errorf("marker state %d, want done (%d)", st, done)
	}
}

// TestWriteAfterCrash: a Write after a writer died in the middle of
// dead-lettering the record, or after it finished. The dead-letter topic
// (three partitions, with other dead letters around the copy) must end with
// exactly one copy, the marker done, and only a Write that wrote the copy
// says so.
func TestWriteAfterCrash(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name   string
		before func(t *testing.T, c *tcase)
		want   Result
	}{
		{
			// The crash fell between the produce and the "done" marker.
			name:   "pending marker, copy written",
			before: func(t *testing.T, c *tcase) { c.crashedAttempt(t, true) },
			want:   AlreadyWritten,
		},
		{
			// The crash fell between the pending marker and the produce.
			name:   "pending marker, no copy",
			before: func(t *testing.T, c *tcase) { c.crashedAttempt(t, false) },
			want:   Written,
		},
		{
			name: "done marker",
			before: func(t *testing.T, c *tcase) {
				c.crashedAttempt(t, true)
				c.setDone(t)
			},
			want: AlreadyWritten,
		},
		{
			name:   "no marker",
			before: func(*testing.T, *tcase) {},
			want:   Written,
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			c := setup(t)
			tc.before(t, c)
			_, othersBefore := c.read(t)
			if res := c.write(t, c.writer(t, nil)); res != tc.want {
				t.Errorf("Write: %v, want %v", res, tc.want)
			}
			copies, others := c.read(t)
			if copies != 1 {
				t.Errorf("dead-letter topic holds %d copies, want 1", copies)
			}
			if others != othersBefore {
				t.Errorf("dead-letter topic holds %d other records, want the %d decoys", others, othersBefore)
			}
			if st := c.markerState(t); st != done {
				t.Errorf("marker state %d, want done (%d)", st, done)
			}
		})
	}
}

// TestWriteWaitsForLockHolder: while another writer holds the record's
// lock, Write writes nothing and does not return, neither while the
// holder's marker is pending nor after the holder's copy landed; once the
// holder marks it done and lets go, Write returns without a second copy.
func TestWriteWaitsForLockHolder(t *testing.T) {
	t.Parallel()
	c := setup(t)
	l := c.lock(t)
	logs := &testkit.LogSink{}
	p := c.startWrite(t, c.writer(t, logs))
	testkit.Eventually(t, 20*time.Second, "the writer to find the lock held", func() bool {
		return logs.Has("dead-letter lock held by another worker")
	})
	c.running(t, p, time.Second, "lock held, no marker")

	c.stamp(t, l, 0) // the holder opens its produce window: the marker is pending
	c.running(t, p, time.Second, "lock held, marker pending")

	c.produceCopy(t)
	select {
	case <-p.done:
		t.Fatalf("lock held, holder's copy written: Write returned %v, %v before the holder marked it done", p.res, p.err)
	case <-time.After(time.Second):
	}

	c.setDone(t)
	must(t, l.Release(t.Context()))
	if res := p.wait(t); res != AlreadyWritten {
		t.Errorf("Write: %v, want %v (the holder wrote the copy)", res, AlreadyWritten)
	}
	if copies, _ := c.read(t); copies != 1 {
		t.Errorf("dead-letter topic holds %d copies, want 1", copies)
	}
}

// TestWriteWaitsOutProduceWindow: a holder opens its produce window and
// loses the lock with its copy still in flight; the copy lands inside the
// window, after the next writer has taken the lock and read the pending
// marker. The next writer waits for the window to close before it looks for
// the copy, finds it, and writes none.
func TestWriteWaitsOutProduceWindow(t *testing.T) {
	t.Parallel()
	c := setup(t)
	const window = 5 * time.Second
	l := c.lock(t)
	c.stamp(t, l, window)
	opened := time.Now()
	must(t, l.Release(t.Context())) // the lock is gone; the holder's produce is not

	logs := &testkit.LogSink{}
	p := c.startWrite(t, c.writer(t, logs))
	testkit.Eventually(t, 20*time.Second, "the writer to wait for the open window", func() bool {
		return logs.Has("dead-letter marker pending: waiting for the earlier attempt's produce window to close")
	})
	time.Sleep(time.Until(opened.Add(window / 2)))
	c.produceCopy(t) // the in-flight copy lands, inside its window
	if res := p.wait(t); res != AlreadyWritten {
		t.Errorf("Write: %v, want %v (the earlier holder wrote the copy)", res, AlreadyWritten)
	}
	if copies, _ := c.read(t); copies != 1 {
		t.Errorf("dead-letter topic holds %d copies, want 1", copies)
	}
	if st := c.markerState(t); st != done {
		t.Errorf("marker state %d, want done (%d)", st, done)
	}
}

// TestWriteConcurrent: writers of their own (each with its own lease
// manager, as workers have) write the same record at once: one copy lands,
// and exactly one writer says it wrote it.
func TestWriteConcurrent(t *testing.T) {
	t.Parallel()
	c := setup(t)
	const writers = 6
	ws := make([]*Writer, writers)
	for i := range ws {
		ws[i] = c.writer(t, nil)
	}
	results := make([]Result, writers)
	errs := make([]error, writers)
	ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
	defer cancel()
	var wg sync.WaitGroup
	for i, w := range ws {
		wg.Go(func() {
			results[i], errs[i] = w.Write(ctx, c.orig, ReasonMissingKey, errors.New("no key"))
		})
	}
	wg.Wait()
	wrote := 0
	for i := range ws {
		must(t, errs[i])
		if results[i] == Written {
			wrote++
		}
	}
	if wrote != 1 {
		t.Errorf("%d writers wrote the copy (results %v), want 1", wrote, results)
	}
	if copies, _ := c.read(t); copies != 1 {
		t.Errorf("dead-letter topic holds %d copies, want 1", copies)
	}
}

// TestWriteTooLarge: the dead-letter topic takes records of at most 100,000
// bytes (max.message.bytes), the record is 200,000 bytes: the broker refuses
// its copy for good. Write writes a small stand-in in its place (no value;
// the reason, the error, the original's coordinates, origin, key and type
// headers, and why it was cut), once.
func TestWriteTooLarge(t *testing.T) {
	t.Parallel()
	c := setup(t)
	c.dlq = c.topic + ".small-dlq"
	limit := "100000"
	resp, err := kadm.NewClient(c.cl).CreateTopic(t.Context(), 1, 1, map[string]*string{"max.message.bytes": &limit}, c.dlq)
	if err == nil {
		err = resp.Err
	}
	must(t, err)
	big := make([]byte, 200_000)
	_, _ = rand.Read(big) // incompressible
	c.orig = c.produceOriginal(t, big)
	w := c.writer(t, nil)
	if res := c.write(t, w); res != WrittenTruncated {
		t.Fatalf("Write: %v, want %v", res, WrittenTruncated)
	}
	if res := c.write(t, w); res != AlreadyWritten {
		t.Errorf("second Write: %v, want %v", res, AlreadyWritten)
	}
	dl := c.kafka.ReadAll(t, c.dlq)
	if len(dl) != 1 {
		t.Fatalf("%d dead-letter records, want 1", len(dl))
	}
	r := dl[0]
	size := len(r.Key) + len(r.Value)
	for _, h := range r.Headers {
		size += len(h.Key) + len(h.Value)
	}
	if size > 16<<10 || len(r.Value) != 0 {
		t.Errorf("the stand-in holds %d bytes (value %d), want a small one without the value", size, len(r.Value))
	}
	want := map[string]string{
		HeaderType: "test.op", HeaderReason: ReasonMissingKey, HeaderError: "no key",
		HeaderTopic: c.topic, HeaderPartition: strconv.Itoa(int(c.orig.Partition)),
		HeaderOffset: strconv.FormatInt(c.orig.Offset, 10), HeaderCluster: c.origin.cluster,
		HeaderTopicID: c.origin.topicIDString(),
	}
	for k, v := range want {
		if got, _ := header(r.Headers, k); string(got) != v {
			t.Errorf("header %s = %q, want %q", k, got, v)
		}
	}
	if tr, _ := header(r.Headers, HeaderTruncated); !strings.Contains(string(tr), "MESSAGE_TOO_LARGE") ||
		!strings.Contains(string(tr), strconv.Itoa(len(big))) {
		t.Errorf("header %s = %q, want the refusal and the original size", HeaderTruncated, tr)
	}
}

// TestWriteNewOrigin: a record dead-lettered on one cluster, or from a
// topic since deleted and created again, leaves its marker; a record with
// the same topic, partition and offset on a new cluster, or in the
// recreated topic, has a marker of its own and is written.
func TestWriteNewOrigin(t *testing.T) {
	t.Parallel()
	t.Run("new cluster", func(t *testing.T) {
		t.Parallel()
		a := setup(t)
		if res := a.write(t, a.writer(t, nil)); res != Written {
			t.Fatalf("Write on the first cluster: %v, want %v", res, Written)
		}
		var kb *testkit.Kafka
		if testkit.IsFake() {
			kb = testkit.StartKafka(t)
		} else {
			kb = testkit.StartApacheKafka(t)
		}
		kb.CreateTopic(t, a.topic, 1)
		kb.CreateTopic(t, a.dlq, 3)
		b := *a
		b.kafka, b.cl, b.other = kb, kb.Client(t, kgo.RecordPartitioner(kgo.ManualPartitioner())), nil
		b.orig = b.produceOriginal(t, []byte("poison"))
		if b.orig.Offset != a.orig.Offset || b.marker == a.marker {
			t.Fatalf("second cluster: offset %d (want %d), marker %q (want other than %q)",
				b.orig.Offset, a.orig.Offset, b.marker, a.marker)
		}
		if res := b.write(t, b.writer(t, nil)); res != Written {
			t.Errorf("Write on the second cluster: %v, want %v", res, Written)
		}
		if copies, others := b.read(t); copies != 1 || others != 0 {
			t.Errorf("second cluster's dead-letter topic holds %d copies and %d others, want 1 and 0", copies, others)
		}
	})
	t.Run("recreated topic", func(t *testing.T) {
		t.Parallel()
		c := setup(t)
		w := c.writer(t, nil)
		if res := c.write(t, w); res != Written {
			t.Fatalf("Write: %v, want %v", res, Written)
		}
		first := c.marker
		c.kafka.RecreateTopic(t, c.topic, 1)
		// A consumer forgets the origin when the new topic's partitions are
		// assigned; a writer of its own reads it afresh.
		w = c.writer(t, nil)
		c.orig = c.produceOriginal(t, []byte("poison"))
		if c.marker == first {
			t.Fatalf("recreated topic: marker %q unchanged", c.marker)
		}
		if res := c.write(t, w); res != Written {
			t.Errorf("Write in the recreated topic: %v, want %v", res, Written)
		}
		if copies, _ := c.read(t); copies != 1 {
			t.Errorf("dead-letter topic holds %d copies of the new record, want 1", copies)
		}
	})
}

// TestOriginsForget: an assignment drops the cached origins of its topics
// only.
func TestOriginsForget(t *testing.T) {
	var c Origins
	c.m = map[string]origin{"a": {cluster: "x"}, "b": {cluster: "x"}}
	c.Forget(map[string][]int32{"a": {0}})
	if _, ok := c.m["a"]; ok {
		t.Error("a still cached after its assignment")
	}
	if _, ok := c.m["b"]; !ok {
		t.Error("b forgotten, but it was not assigned")
	}
}

// TestOffsetsRoundTrip: the offsets stored in a pending marker read back as
// written; a damaged value reads as "from the log start".
func TestOffsetsRoundTrip(t *testing.T) {
	for _, offs := range []map[int32]int64{{}, {0: 0}, {0: 12, 1: 7, 10: 1 << 40}} {
		s := formatOffsets(offs)
		got := parseOffsets(s)
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
		if got := parseOffsets(bad); got != nil {
			t.Errorf("parseOffsets(%q) = %v, want nil", bad, got)
		}
	}
}

// TestNewConfig: New refuses a config without a required dependency.
func TestNewConfig(t *testing.T) {
	if _, err := New(Config{Topic: "t"}); !errors.Is(err, ErrConfig) {
		t.Errorf("New without a client: %v, want ErrConfig", err)
	}
}
