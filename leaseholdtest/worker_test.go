package leaseholdtest_test

import (
	"context"
	"os"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/twmb/franz-go/pkg/kgo"
	"go.uber.org/goleak"

	"github.com/leasehold/leasehold"
	"github.com/leasehold/leasehold/leaseholdtest"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// TestWholeWorker: the documented setup of a whole-worker test (Redis, the
// in-process Kafka, a key prefix of the test's own) runs a job end to end,
// and the prefix's keys are gone after the test.
func TestWholeWorker(t *testing.T) {
	t.Parallel()
	url := os.Getenv("REDIS_URL")
	if url == "" {
		url = "redis://127.0.0.1:6379/0"
	}
	opt, err := redis.ParseURL(url)
	if err != nil {
		t.Fatal(err)
	}
	rdb := redis.NewClient(opt)
	t.Cleanup(func() { _ = rdb.Close() })

	var prefix string
	t.Run("worker", func(t *testing.T) {
		brokers := leaseholdtest.Kafka(t, "jobs")
		prefix = leaseholdtest.KeyPrefix(t, rdb)
		done := make(chan string, 1)
		w, err := leasehold.New(rdb, leasehold.WithKafka(kgo.SeedBrokers(brokers...)),
			leasehold.WithTopics("jobs"), leasehold.WithKeyPrefix(prefix), leasehold.WithGroup("test"),
			leasehold.WithHooks(leasehold.Hooks{OnDone: func(_ context.Context, _ *leasehold.Job, res []byte, _ error) {
				done <- string(res)
			}}))
		if err != nil {
			t.Fatal(err)
		}
		err = w.Register("greet", leasehold.Typed(func(_ context.Context, _ *leasehold.Job, name string) (string, error) {
			return "hello " + name, nil
		}))
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
		defer cancel()
		if err := w.Start(ctx); err != nil {
			t.Fatal(err)
		}
		defer func() { _ = w.Shutdown(context.Background()) }()

		cl, err := kgo.NewClient(kgo.SeedBrokers(brokers...), kgo.DefaultProduceTopic("jobs"))
		if err != nil {
			t.Fatal(err)
		}
		defer cl.Close()
		if _, err := leasehold.Enqueue(ctx, cl, leasehold.NewJob{Type: "greet", Key: "g-1", Payload: []byte(`"ada"`)}); err != nil {
			t.Fatal(err)
		}
		select {
		case res := <-done:
			if res != `"hello ada"` {
				t.Errorf("result %s, want \"hello ada\"", res)
			}
		case <-ctx.Done():
			t.Fatal("the job did not complete within 60s")
		}
	})
	keys, _, err := rdb.Scan(context.Background(), 0, prefix+"*", 1000).Result()
	if err != nil || len(keys) != 0 {
		t.Errorf("keys under %q after the test: %v (%v)", prefix, keys, err)
	}
}
