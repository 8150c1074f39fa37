package leasehold

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/leasehold/leasehold/internal/testkit"
)

// harness is one test's Kafka (kfake or KAFKA_BROKERS), Redis key prefix,
// topic and group.
type harness struct {
	kafka  *testkit.Kafka
	rdb    redis.UniversalClient
	prefix string
	topic  string
	dlq    string
	group  string
}

func setup(t *testing.T, partitions int32) *harness {
	t.Helper()
	k := testkit.StartKafka(t)
	rdb, prefix := testkit.SharedRedis(t)
	topic := k.Topic(t, "jobs", partitions)
	dlq := topic + ".dlq"
	k.CreateTopic(t, dlq, 1)
	return &harness{kafka: k, rdb: rdb, prefix: prefix, topic: topic, dlq: dlq, group: "g-" + topic}
}

// opts are the worker options every test worker gets: short TTLs and
// backoffs, fast commits.
func (h *harness) opts(extra ...Opt) []Opt {
	return append([]Opt{
		WithKafka(kgo.SeedBrokers(h.kafka.Brokers()...), kgo.FetchMaxWait(200*time.Millisecond)),
		WithGroup(h.group),
		WithTopics(h.topic),
		WithDeadLetterTopic(h.dlq),
		WithKeyPrefix(h.prefix),
		WithLeaseTTL(2 * time.Second),
		WithCommitInterval(200 * time.Millisecond),
		WithHeldBackoff(20*time.Millisecond, 300*time.Millisecond),
		WithRedisProbe(50*time.Millisecond, 300*time.Millisecond),
		WithShutdownTimeout(10 * time.Second),
		WithJobDefaults(WithBackoff(20*time.Millisecond, 200*time.Millisecond)),
	}, extra...)
}

// proxiedRedis returns a client of the shared Redis that goes through a
// proxy the test can cut (a worker that stalls or loses Redis), with short
// timeouts and no retries, closed at cleanup.
func (h *harness) proxiedRedis(t *testing.T) (*testkit.Proxy, *redis.Client) {
	t.Helper()
	shared := h.rdb.(*redis.Client).Options()
	proxy := testkit.StartProxy(t, shared.Addr)
	c := redis.NewClient(&redis.Options{Addr: proxy.Addr(), DB: shared.DB, MaxRetries: -1,
		DialTimeout: 200 * time.Millisecond, ReadTimeout: 300 * time.Millisecond, WriteTimeout: 300 * time.Millisecond})
	t.Cleanup(func() { _ = c.Close() })
	return proxy, c
}

// start builds a worker over rdb, lets reg register handlers, starts it, and
// shuts it down at cleanup (if the test did not).
func (h *harness) start(t *testing.T, rdb redis.UniversalClient, reg func(*Worker), extra ...Opt) *Worker {
	t.Helper()
	w, err := New(rdb, h.opts(extra...)...)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	reg(w)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := w.Start(ctx); err != nil {
		t.Fatalf("Start: %v", err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		_ = w.Shutdown(ctx)
	})
	return w
}

func (h *harness) produce(t *testing.T, recs []*kgo.Record) {
	t.Helper()
	cl := h.kafka.Client(t, kgo.DefaultProduceTopic(h.topic), kgo.ProducerLinger(5*time.Millisecond))
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	if err := cl.ProduceSync(ctx, recs...).FirstErr(); err != nil {
		t.Fatalf("produce: %v", err)
	}
}

func jobRecord(t *testing.T, j NewJob) *kgo.Record {
	t.Helper()
	r, err := j.record(context.Background())
	if err != nil {
		t.Fatalf("record: %v", err)
	}
	return r
}

// effects counts, per key, how many times a job's effect happened.
type effects struct {
	mu sync.Mutex
	n  map[string]int
}

func newEffects() *effects { return &effects{n: make(map[string]int)} }

func (e *effects) add(key string) {
	e.mu.Lock()
	e.n[key]++
	e.mu.Unlock()
}

func (e *effects) count(key string) int {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.n[key]
}

func (e *effects) snapshot() map[string]int {
	e.mu.Lock()
	defer e.mu.Unlock()
	out := make(map[string]int, len(e.n))
	for k, v := range e.n {
		out[k] = v
	}
	return out
}

// waitCommitted waits until the group committed the end of every partition.
func (h *harness) waitCommitted(t *testing.T, timeout time.Duration) {
	t.Helper()
	end := h.kafka.EndOffsets(t, h.topic)
	testkit.Eventually(t, timeout, "offsets committed to the end", func() bool {
		got := h.kafka.Committed(t, h.group, h.topic)
		for p, e := range end {
			if got[p] != e {
				return false
			}
		}
		return true
	})
}

func keyOf(r *kgo.Record) string { return string(headerValue(r.Headers, HeaderKey)) }

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// startHolder starts a worker in a consumer group of its own (the harness's
// group + "-holder") whose handler of typ keeps the key it runs, and its
// lease, until unblock is called (at cleanup at the latest) or its context
// ends. holding receives when a job of typ starts (one signal pending at
// most: a job starting while one is pending does not block on it).
func (h *harness) startHolder(t *testing.T, typ string) (holder *Worker, holding <-chan struct{}, unblock func()) {
	t.Helper()
	release := make(chan struct{})
	var once sync.Once
	unblock = func() { once.Do(func() { close(release) }) }
	t.Cleanup(unblock)
	started := make(chan struct{}, 1)
	holder = h.start(t, h.rdb, func(w *Worker) {
		must(t, w.Register(typ, func(ctx context.Context, _ *Job) ([]byte, error) {
			select {
			case started <- struct{}{}:
			default:
			}
			select {
			case <-release:
			case <-ctx.Done():
			}
			return nil, nil
		}))
	}, WithGroup(h.group+"-holder"))
	return holder, started, unblock
}
