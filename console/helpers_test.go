package console_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/leasehold/leasehold"
	"github.com/leasehold/leasehold/compensation"
	"github.com/leasehold/leasehold/internal/testkit"
	"github.com/redis/go-redis/v9"
)

// world is a real worker (kfake, the shared Redis) with three job types:
// test.long runs until its lease is lost on its first attempt (heartbeating
// and journaling a saga step compensated by test.unreserve), test.pay fails
// permanently until fixed, then succeeds.
type world struct {
	rdb         *redis.Client
	prefix      string
	kafka       *testkit.Kafka
	topic, dlq  string
	group       string
	w           *leasehold.Worker
	reg         *compensation.Registry
	unreserve   compensation.Undo[string]
	undone      atomic.Int32 // test.unreserve runs
	failUndo    atomic.Bool  // test.unreserve fails
	fixed       atomic.Bool  // test.pay succeeds
	paid        atomic.Int32 // test.pay successes
	longStarted atomic.Int32
}

func setup(t *testing.T) *world {
	t.Helper()
	wd := &world{}
	// A Redis of its own: the pages scan the keyspace a page at a time, and
	// the shared server holds every other package's keys.
	wd.rdb, wd.prefix = testkit.StartRedis(t).Client(t), "lh:"
	wd.kafka = testkit.StartKafka(t)
	wd.topic = wd.kafka.Topic(t, "console", 2)
	wd.dlq = wd.topic + ".dlq"
	wd.kafka.CreateTopic(t, wd.dlq, 1)
	wd.group = "g-" + wd.topic
	wd.reg = compensation.NewRegistry()
	var err error
	if wd.unreserve, err = compensation.RegisterUndo(wd.reg, "test.unreserve", func(_ context.Context, _ string) error {
		if wd.failUndo.Load() {
			return errors.New("inventory service down")
		}
		wd.undone.Add(1)
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	w, err := leasehold.New(wd.rdb, leasehold.WithKafka(kgo.SeedBrokers(wd.kafka.Brokers()...), kgo.FetchMaxWait(200*time.Millisecond)),
		leasehold.WithTopics(wd.topic), leasehold.WithDeadLetterTopic(wd.dlq), leasehold.WithGroup(wd.group),
		leasehold.WithKeyPrefix(wd.prefix), leasehold.WithLeaseTTL(3*time.Second), leasehold.WithCommitInterval(200*time.Millisecond),
		leasehold.WithHeartbeatThrottle(100*time.Millisecond), leasehold.WithHeldBackoff(100*time.Millisecond, time.Second),
		leasehold.WithJobDefaults(leasehold.WithBackoff(100*time.Millisecond, 500*time.Millisecond)),
		leasehold.WithCompensation(wd.reg, compensation.WithAttempts(2), compensation.WithBackoff(50*time.Millisecond, 100*time.Millisecond)))
	if err != nil {
		t.Fatal(err)
	}
	if err := w.Register("test.long", wd.long); err != nil {
		t.Fatal(err)
	}
	if err := w.Register("test.pay", func(context.Context, *leasehold.Job) ([]byte, error) {
		if !wd.fixed.Load() {
			return nil, leasehold.Permanent(errors.New("card declined: handler bug"))
		}
		wd.paid.Add(1)
		return []byte("paid"), nil
	}); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := w.Start(ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = w.Shutdown(context.Background()) })
	wd.w = w
	return wd
}

// long journals a step, then heartbeats until its lease is lost (first
// attempt); later attempts finish at once.
func (wd *world) long(ctx context.Context, j *leasehold.Job) ([]byte, error) {
	if j.Attempt > 1 {
		return []byte("resumed from " + string(j.LastHeartbeat())), nil
	}
	wd.longStarted.Add(1)
	if err := leasehold.StepWith(ctx, j, "reserve", func(context.Context) error { return nil }, wd.unreserve, j.Key); err != nil {
		return nil, err
	}
	for i := 1; ; i++ {
		_ = j.Heartbeat(ctx, []byte("transcoded "+strconv.Itoa(i)+" of 1000 segments <b>&</b>"))
		select {
		case <-ctx.Done():
			return nil, context.Cause(ctx)
		case <-time.After(150 * time.Millisecond):
		}
	}
}

func (wd *world) enqueue(t *testing.T, jobs ...leasehold.NewJob) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	prod := wd.kafka.Client(t, kgo.DefaultProduceTopic(wd.topic))
	for _, j := range jobs {
		if _, err := leasehold.Enqueue(ctx, prod, j); err != nil {
			t.Fatal(err)
		}
	}
}

// screenshotDir is where browser tests write their screenshots: docs/console
// when LEASEHOLD_CONSOLE_SCREENSHOTS=1 (to refresh the docs), else a
// temporary directory.
func screenshotDir(t *testing.T) string {
	if os.Getenv("LEASEHOLD_CONSOLE_SCREENSHOTS") == "1" {
		d, err := filepath.Abs(filepath.Join("..", "docs", "console"))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.MkdirAll(d, 0o750); err != nil {
			t.Fatal(err)
		}
		return d
	}
	return t.TempDir()
}

// leaseName is the lease name the worker's store gives key (its "{tag}:"
// and the key), read from the lease keys in Redis.
func leaseName(t *testing.T, wd *world, key string) string {
	t.Helper()
	ks, err := wd.rdb.Keys(context.Background(), wd.prefix+"lease:*:"+key).Result() // test only: a handful of keys
	if err != nil || len(ks) != 1 {
		t.Fatalf("lease key of %s: %v %v", key, ks, err)
	}
	return strings.TrimPrefix(ks[0], wd.prefix+"lease:")
}
