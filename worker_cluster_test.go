package leasehold

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/leasehold/leasehold/internal/testkit"
)

// TestWorkerOnCluster runs two workers, unchanged but for the client, over a
// six-node Redis Cluster (go-redis ClusterClient) with compensation enabled.
// It enqueues distinct jobs plus 20% duplicates, each job doing one
// compensated Step, and expires the lease of one running job. Every job must
// end with exactly one standing effect, duplicates must be replayed, the
// lost-lease job's step must be compensated exactly once, every key of a job
// must live in one hash slot, and offsets must be committed to the end.
func TestWorkerOnCluster(t *testing.T) {
	testkit.SkipShort(t, "Kafka and a Redis Cluster")
	const (
		jobs = 300
		dups = jobs / 5
		lost = "cj-lost"
	)
	cluster := testkit.StartCluster(t)
	crdb := cluster.Client(t)
	k := testkit.StartKafka(t)
	topic := k.Topic(t, "jobs", 4)
	h := &harness{kafka: k, rdb: crdb, prefix: "lhc:", topic: topic, dlq: topic + ".dlq", group: "g-" + topic}
	k.CreateTopic(t, h.dlq, 1)

	led, reg := refundLedger()
	var lostHooks atomic.Int32
	running := make(chan *Job, 1)
	var blockOnce sync.Once
	handler := func(ctx context.Context, j *Job) ([]byte, error) {
		err := j.Step(ctx, "charge", func(context.Context) error { led.charge(j.Key); return nil },
			"test.refund", refundArgs{Key: j.Key})
		if err != nil {
			return nil, err
		}
		if j.Key == lost && !j.Takeover {
			blocked := false
			blockOnce.Do(func() { blocked = true })
			if blocked {
				running <- j
				<-ctx.Done() // wait for the lease to be taken away
				return nil, context.Cause(ctx)
			}
		}
		return []byte("ok:" + j.Key), nil
	}
	register := func(w *Worker) { must(t, w.Register("test.saga", handler)) }
	extra := []Opt{WithCompensation(reg), WithConcurrency(8),
		WithHooks(Hooks{OnLeaseLost: func(context.Context, *Job, error) { lostHooks.Add(1) }})}
	w1 := h.start(t, crdb, register, extra...)
	w2 := h.start(t, crdb, register, extra...)

	key := func(i int) string { return fmt.Sprintf("cj-%04d", i) }
	recs := []*kgo.Record{jobRecord(t, NewJob{Type: "test.saga", Key: lost})}
	for i := range jobs - 1 {
		recs = append(recs, jobRecord(t, NewJob{Type: "test.saga", Key: key(i)}))
	}
	// Duplicates follow the originals; records of one key share a partition,
	// so each duplicate arrives after (or while) its original runs.
	rng := rand.New(rand.NewPCG(8, 8))
	for range dups {
		recs = append(recs, jobRecord(t, NewJob{Type: "test.saga", Key: key(rng.IntN(jobs - 1))}))
	}
	// A record without an idempotency key is dead-lettered: its marker and
	// its dead-letter lock share a slot (the fenced stamp script needs both).
	recs = append(recs, &kgo.Record{Value: []byte("no key header"),
		Headers: []kgo.RecordHeader{{Key: HeaderType, Value: []byte("test.saga")}}})
	h.produce(t, recs)

	var j *Job
	select {
	case j = <-running:
	case <-time.After(20 * time.Second):
		t.Fatal("the lost-lease job never started")
	}
	rs := w1.store.(*redisStore)
	leaseKey := rs.m.Key(rs.s.LeaseName(j.Key))
	// Deleted, not given a 1 ms TTL, which a renewal within that millisecond
	// would undo.
	if n, err := crdb.Del(context.Background(), leaseKey).Result(); err != nil || n != 1 {
		t.Fatalf("DEL %s on the cluster = %v, %v; want the running job's lease", leaseKey, n, err)
	}

	all := []string{lost}
	for i := range jobs - 1 {
		all = append(all, key(i))
	}
	testkit.Eventually(t, 30*time.Second, "every job's effect standing", func() bool {
		for _, k := range all {
			if c, r := led.net(k); c-r != 1 {
				return false
			}
		}
		return true
	})
	h.waitCommitted(t, 20*time.Second)

	for _, k := range all {
		c, r := led.net(k)
		if c-r != 1 {
			t.Errorf("%s: %d charges, %d refunds; want exactly one standing", k, c, r)
		}
	}
	if c, r := led.net(lost); c != 2 || r != 1 {
		t.Errorf("%s: %d charges, %d refunds; want 2 and 1 (the lost attempt undone once)", lost, c, r)
	}
	if n := lostHooks.Load(); n < 1 {
		t.Errorf("lost-lease hooks: %d, want at least 1", n)
	}
	var replayed, takeovers, leasesLost int64
	for _, w := range []*Worker{w1, w2} {
		s := w.Stats()
		replayed += s.Replayed
		takeovers += s.Claimed[OutcomeTakeover]
		leasesLost += s.LeasesLost
	}
	var reasons []string
	for _, r := range h.kafka.ReadAll(t, h.dlq) {
		reasons = append(reasons, string(headerValue(r.Headers, HeaderDLQReason)))
	}
	if len(reasons) != 1 || reasons[0] != ReasonMissingKey {
		t.Errorf("dead-letter topic reasons %v, want exactly [%s]", reasons, ReasonMissingKey)
	}
	if dl := w1.Stats().DeadLettered + w2.Stats().DeadLettered; dl != 1 {
		t.Errorf("dead-lettered %d, want 1", dl)
	}
	if replayed < dups {
		t.Errorf("replayed %d duplicates, want at least %d", replayed, dups)
	}
	if takeovers < 1 {
		t.Errorf("takeovers: %d, want at least 1 (the lost-lease job)", takeovers)
	}
	t.Logf("replayed %d, takeovers %d, leases lost %d", replayed, takeovers, leasesLost)

	// Every key a job left behind (its record's bucket, details and result,
	// its lease, its compensation journal and fences) carries the job's hash
	// tag and lives in the slot of its lease key, as CLUSTER KEYSLOT
	// computes it.
	ctx := context.Background()
	for _, k := range []string{lost, key(0), key(1), key(jobs / 2), key(jobs - 2)} {
		tag := rs.s.Tag(k)
		var mu sync.Mutex
		var found []string
		err := crdb.ForEachMaster(ctx, func(ctx context.Context, m *redis.Client) error {
			it := m.Scan(ctx, 0, h.prefix+"*"+tag+"*", 1000).Iterator()
			for it.Next(ctx) {
				mu.Lock()
				found = append(found, it.Val())
				mu.Unlock()
			}
			return it.Err()
		})
		if err != nil {
			t.Fatalf("scan for %s: %v", k, err)
		}
		journal := false
		for _, key := range found {
			journal = journal || strings.Contains(key, "comp:j:") && strings.Contains(key, ":"+k+":")
		}
		if len(found) < 2 || !journal {
			t.Errorf("%s: found keys %v, want at least its record and its compensation journal", k, found)
			continue
		}
		want, err := cluster.Slot(ctx, rs.m.Key(rs.s.LeaseName(k)))
		if err != nil {
			t.Fatalf("CLUSTER KEYSLOT: %v", err)
		}
		for _, key := range found {
			s, err := cluster.Slot(ctx, key)
			if err != nil {
				t.Fatalf("CLUSTER KEYSLOT %s: %v", key, err)
			}
			if s != want {
				t.Errorf("%s: key %s in slot %d, its lease key in slot %d", k, key, s, want)
			}
		}
	}
}
