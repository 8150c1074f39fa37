package leasehold_test

import (
	"context"
	"fmt"
	"log"
	"os/signal"
	"strconv"
	"syscall"

	"github.com/redis/go-redis/v9"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/leasehold/leasehold"
)

// A worker with one job type that heartbeats its progress and resumes from
// the previous attempt's last heartbeat.
func ExampleWorker() {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()

	rdb := redis.NewClient(&redis.Options{Addr: "127.0.0.1:6379"})
	defer func() { _ = rdb.Close() }()
	w, err := leasehold.New(rdb,
		leasehold.WithKafka(kgo.SeedBrokers("127.0.0.1:9092")),
		leasehold.WithTopics("leasehold.jobs"),
		leasehold.WithGroup("transcoders"),
	)
	if err != nil {
		log.Fatal(err)
	}
	err = w.Register("video.transcode", func(ctx context.Context, job *leasehold.Job) ([]byte, error) {
		from := 0
		if cp := job.LastHeartbeat(); cp != nil {
			from, _ = strconv.Atoi(string(cp))
		}
		for chunk := from; chunk < 10; chunk++ {
			if err := ctx.Err(); err != nil {
				return nil, context.Cause(ctx) // ErrLeaseLost when the lease is gone
			}
			// ... transcode chunk, writing downstream with job.Fence() ...
			if err := job.Heartbeat(ctx, []byte(strconv.Itoa(chunk+1))); err != nil {
				return nil, err
			}
		}
		return []byte("transcoded"), nil
	}, leasehold.WithMaxAttempts(5))
	if err != nil {
		log.Fatal(err)
	}
	if err := w.Run(ctx); err != nil {
		log.Fatal(err)
	}
}

// Enqueue sets the idempotency-key and job-type headers; pass a
// deterministic key so that a producer's retries deduplicate.
func ExampleEnqueue() {
	cl, err := kgo.NewClient(kgo.SeedBrokers("127.0.0.1:9092"), kgo.DefaultProduceTopic("leasehold.jobs"))
	if err != nil {
		log.Fatal(err)
	}
	defer cl.Close()
	key, err := leasehold.Enqueue(context.Background(), cl, leasehold.NewJob{
		Type:    "video.transcode",
		Key:     "upload-42",
		Payload: []byte(`{"url":"s3://bucket/upload-42.mov"}`),
	})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(key)
}

// Typed decodes the JSON payload and encodes the result.
func ExampleTyped() {
	type charge struct {
		Account string `json:"account"`
		Cents   int64  `json:"cents"`
	}
	type receipt struct {
		ID string `json:"id"`
	}
	h := leasehold.Typed(func(ctx context.Context, job *leasehold.Job, c charge) (receipt, error) {
		return receipt{ID: fmt.Sprintf("%s-%d-%d", c.Account, c.Cents, job.Fence())}, nil
	})
	_ = h
}

// Middleware composes: the first is the outermost.
func ExampleChain() {
	logging := func(next leasehold.Handler) leasehold.Handler {
		return func(ctx context.Context, job *leasehold.Job) ([]byte, error) {
			res, err := next(ctx, job)
			log.Printf("%s %s attempt %d: %v", job.Type, job.Key, job.Attempt, err)
			return res, err
		}
	}
	h := leasehold.Chain(logging)(func(ctx context.Context, job *leasehold.Job) ([]byte, error) {
		return nil, nil
	})
	_ = h
}
