package deadletter

import (
	"context"
	"errors"
	"log/slog"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/leasehold/leasehold/internal/leasing"
	"github.com/leasehold/leasehold/internal/testkit"
	"github.com/leasehold/leasehold/lease"
)

// tcase is one test's setup for dead-lettering one record: a jobs topic
// holding it, a dead-letter topic with three partitions holding unrelated
// dead letters (decoys), the record as read back (with its topic, partition
// and offset) and its topic's origin.
type tcase struct {
	kafka  *testkit.Kafka
	rdb    redis.UniversalClient
	prefix string
	topic  string // the jobs topic
	dlq    string
	orig   *kgo.Record
	origin origin
	cl     *kgo.Client    // manual partitioner: records go to rec.Partition
	other  *lease.Manager // another writer's, for its lock (see lock)
	marker string
	decoys int
}

func setup(t *testing.T) *tcase {
	t.Helper()
	k := testkit.StartKafka(t)
	rdb, prefix := testkit.SharedRedis(t)
	c := &tcase{kafka: k, rdb: rdb, prefix: prefix, topic: k.Topic(t, "jobs", 1), dlq: k.Topic(t, "jobs-dlq", 3),
		cl: k.Client(t, kgo.RecordPartitioner(kgo.ManualPartitioner()))}
	c.orig = c.produceOriginal(t, []byte("poison"))
	c.decoys = c.produceDecoys(t)
	return c
}

// produceOriginal writes a record of value to the jobs topic and returns it
// as read back, setting c.origin and c.marker.
func (c *tcase) produceOriginal(t *testing.T, value []byte) *kgo.Record {
	t.Helper()
	ctx := t.Context()
	rec := &kgo.Record{Topic: c.topic, Key: []byte("poison"), Value: value,
		Headers: []kgo.RecordHeader{{Key: HeaderType, Value: []byte("test.op")}}}
	must(t, c.kafka.Client(t, kgo.ProducerBatchMaxBytes(2<<20)).ProduceSync(ctx, rec).FirstErr())
	o, err := fetchOrigin(ctx, c.cl, c.topic)
	must(t, err)
	c.origin = o
	c.marker = c.prefix + copyID(c.dlq, o, rec)
	return rec
}

// produceDecoys writes, to every partition of the dead-letter topic, copies
// of other records: same topic other offset, same offset other partition,
// same partition and offset of another topic, and same topic, partition and
// offset of an earlier topic of the same name (another topic ID) or of
// another cluster. It returns how many it wrote.
func (c *tcase) produceDecoys(t *testing.T) int {
	t.Helper()
	earlier, otherCluster := c.origin, c.origin
	earlier.topicID[0]++
	otherCluster.cluster += "-other"
	others := []struct {
		r *kgo.Record
		o origin
	}{
		{&kgo.Record{Topic: c.orig.Topic, Partition: c.orig.Partition, Offset: c.orig.Offset + 1}, c.origin},
		{&kgo.Record{Topic: c.orig.Topic, Partition: c.orig.Partition + 1, Offset: c.orig.Offset}, c.origin},
		{&kgo.Record{Topic: c.orig.Topic + "-other", Partition: c.orig.Partition, Offset: c.orig.Offset}, c.origin},
		{c.orig, earlier},
		{c.orig, otherCluster},
	}
	n := 0
	for p := range int32(3) {
		for _, o := range others {
			rec := withOrigin(newRecord(c.dlq, o.r, ReasonPermanent, errors.New("decoy")), o.o)
			rec.Partition = p
			must(t, c.cl.ProduceSync(t.Context(), rec).FirstErr())
			n++
		}
	}
	return n
}

// writer returns a Writer over c's topics with a lease manager of its own
// (as a worker has), logging to logs if not nil.
func (c *tcase) writer(t *testing.T, logs *testkit.LogSink) *Writer {
	t.Helper()
	log := slog.New(slog.DiscardHandler)
	if logs != nil {
		log = slog.New(logs)
	}
	w, err := New(Config{
		Topic:     c.dlq,
		Client:    c.kafka.Client(t),
		ConnOpts:  []kgo.Opt{kgo.SeedBrokers(c.kafka.Brokers()...), kgo.FetchMaxWait(200 * time.Millisecond)},
		Redis:     c.rdb,
		Locks:     leasing.Fencer{Manager: c.leases(t)},
		KeyPrefix: c.prefix,
		Retention: time.Hour,
		Logger:    log,
		HeldMin:   20 * time.Millisecond,
		HeldMax:   300 * time.Millisecond,
		RetryMin:  50 * time.Millisecond,
		RetryMax:  300 * time.Millisecond,
	})
	must(t, err)
	return w
}

// leases returns a started lease manager over c's Redis and prefix, shut
// down at cleanup.
func (c *tcase) leases(t *testing.T) *lease.Manager {
	t.Helper()
	m, err := lease.NewManager(c.rdb, lease.WithPrefix(c.prefix), lease.WithTTL(2*time.Second))
	must(t, err)
	must(t, m.Start(t.Context()))
	t.Cleanup(func() { _ = m.Shutdown(context.Background()) })
	return m
}

// write runs w.Write for c.orig within 60s.
func (c *tcase) write(t *testing.T, w *Writer) Result {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
	defer cancel()
	res, err := w.Write(ctx, c.orig, ReasonMissingKey, errors.New("no key"))
	must(t, err)
	return res
}

// crashedAttempt does what a writer does before it dies in the middle of
// dead-lettering: under the record's lock it opens the marker's produce
// window (the marker is then pending) and, with produce, writes the copy (to
// partition 2) without setting the marker to done; without produce, only
// decoys land after the window opened. The lock is then let go and the
// window is closed (length zero), as they are once a dead writer's lease has
// expired.
func (c *tcase) crashedAttempt(t *testing.T, produce bool) {
	t.Helper()
	l := c.lock(t)
	c.stamp(t, l, 0)
	if produce {
		c.produceCopy(t)
	} else {
		// Copies with the record's coordinates but of an earlier topic of
		// the same name, or of another cluster, lie where the scan looks:
		// they are not the record's copy.
		c.decoys += c.produceDecoys(t)
	}
	must(t, l.Release(t.Context()))
}

// lock takes the record's dead-letter lock, as another writer would.
func (c *tcase) lock(t *testing.T) *lease.Lease {
	t.Helper()
	if c.other == nil {
		c.other = c.leases(t)
	}
	l, err := c.other.Acquire(t.Context(), copyID(c.dlq, c.origin, c.orig))
	must(t, err)
	return l
}

// stamp opens a produce window of length window on the marker under the
// lock l, as a writer does right before it produces the copy.
func (c *tcase) stamp(t *testing.T, l *lease.Lease, window time.Duration) {
	t.Helper()
	from, err := EndOffsets(t.Context(), c.cl, c.dlq)
	must(t, err)
	isDone, err := stamp(t.Context(), leasing.Fencer{Manager: c.other}, l, c.marker, from, window, time.Hour)
	must(t, err)
	if isDone {
		t.Fatal("marker already done")
	}
}

// produceCopy writes the record's copy to partition 2, as another writer
// would.
func (c *tcase) produceCopy(t *testing.T) {
	t.Helper()
	rec := withOrigin(newRecord(c.dlq, c.orig, ReasonMissingKey, errors.New("no key")), c.origin)
	rec.Partition = 2
	must(t, c.cl.ProduceSync(t.Context(), rec).FirstErr())
}

// setDone sets the marker to done, as a writer does after its produce.
func (c *tcase) setDone(t *testing.T) {
	t.Helper()
	must(t, c.rdb.Set(t.Context(), c.marker, markerDone, time.Hour).Err())
}

// read counts the copies of the record (its cluster, topic ID, topic,
// partition and offset in the dlq-original-* headers) and the other records
// in the dead-letter topic.
func (c *tcase) read(t *testing.T) (copies, others int) {
	t.Helper()
	want := []string{c.origin.cluster, c.origin.topicIDString(), c.orig.Topic, strconv.Itoa(int(c.orig.Partition)),
		strconv.FormatInt(c.orig.Offset, 10)}
	for _, r := range c.kafka.ReadAll(t, c.dlq) {
		var got []string
		for _, k := range []string{HeaderCluster, HeaderTopicID, HeaderTopic, HeaderPartition, HeaderOffset} {
			v, _ := header(r.Headers, k)
			got = append(got, string(v))
		}
		if slices.Equal(got, want) {
			copies++
		} else {
			others++
		}
	}
	return copies, others
}

func (c *tcase) markerState(t *testing.T) markerState {
	t.Helper()
	m, err := readMarker(t.Context(), c.rdb, c.marker)
	must(t, err)
	return m.state
}

// pendingWrite runs w.Write for c.orig in the background; wait returns its
// result.
type pendingWrite struct {
	done chan struct{}
	res  Result
	err  error
}

func (c *tcase) startWrite(t *testing.T, w *Writer) *pendingWrite {
	t.Helper()
	p := &pendingWrite{done: make(chan struct{})}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	t.Cleanup(func() { cancel(); <-p.done })
	go func() {
		defer close(p.done)
		p.res, p.err = w.Write(ctx, c.orig, ReasonMissingKey, errors.New("no key"))
	}()
	return p
}

// running checks, for hold, that the write has not returned and no copy was
// written.
func (c *tcase) running(t *testing.T, p *pendingWrite, hold time.Duration, why string) {
	t.Helper()
	select {
	case <-p.done:
		t.Fatalf("%s: Write returned %v, %v", why, p.res, p.err)
	case <-time.After(hold):
	}
	if copies, _ := c.read(t); copies != 0 {
		t.Fatalf("%s: %d copies written", why, copies)
	}
}

func (p *pendingWrite) wait(t *testing.T) Result {
	t.Helper()
	select {
	case <-p.done:
	case <-time.After(60 * time.Second):
		t.Fatal("Write did not return within 60s")
	}
	must(t, p.err)
	return p.res
}

func must(t testing.TB, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}
