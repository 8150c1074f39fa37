// Command quickstart is leasehold in one file: a producer enqueues three
// jobs, a worker runs each of them once, and a duplicate that the producer
// sends again is answered from the cached result instead of running twice.
//
// It needs a Redis server (REDIS_URL, default redis://127.0.0.1:6379) and
// starts an in-process Kafka (franz-go's kfake), so nothing else has to run:
//
//	go run ./examples/quickstart
package main

import (
	"cmp"
	"context"
	"crypto/rand"
	"fmt"
	"io"
	"log"
	"os"
	"os/signal"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/leasehold/leasehold"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	redisURL := cmp.Or(os.Getenv("REDIS_URL"), "redis://127.0.0.1:6379")
	if err := run(ctx, os.Stdout, redisURL); err != nil {
		fmt.Fprintln(os.Stderr, "quickstart:", err)
		os.Exit(1)
	}
}

// signup is the payload of a welcome email job, and sent its result.
type signup struct {
	Email string `json:"email"`
}

type sent struct {
	MessageID string `json:"message_id"`
}

// run does the whole tour and returns when every job is finished (or ctx
// ends). It writes what happens to out.
func run(ctx context.Context, out io.Writer, redisURL string) error {
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	say := log.New(out, "", 0) // safe to use from the handler's goroutines

	// An in-process Kafka with the jobs topic and its dead-letter topic: the
	// worker refuses to start unless both exist (it never creates topics).
	const topic = "quickstart.jobs"
	kafka, err := kfake.NewCluster(kfake.SeedTopics(1, topic, topic+".dlq"))
	if err != nil {
		return fmt.Errorf("start the embedded Kafka: %w", err)
	}
	defer kafka.Close()

	opts, err := redis.ParseURL(redisURL)
	if err != nil {
		return fmt.Errorf("REDIS_URL: %w", err)
	}
	rdb := redis.NewClient(opts)
	defer func() { _ = rdb.Close() }()
	if err := rdb.Ping(ctx).Err(); err != nil {
		return fmt.Errorf("redis at %s does not answer (start one, or set REDIS_URL): %w", opts.Addr, err)
	}

	// The worker's keys go under a prefix of this run's own, deleted at the
	// end (and kept at most a minute after they were last written).
	prefix := "quickstart:" + strings.ToLower(rand.Text()[:8]) + ":"
	defer func() {
		if err := deleteKeys(context.WithoutCancel(ctx), rdb, prefix); err != nil {
			say.Printf("cleanup: %v", err)
		}
	}()

	// finished receives a key each time a record is done with: its handler
	// ran, or its cached result was replayed.
	finished := make(chan string, 16)
	w, err := leasehold.New(rdb,
		leasehold.WithKafka(kgo.SeedBrokers(kafka.ListenAddrs()...)),
		leasehold.WithTopics(topic),
		leasehold.WithGroup("quickstart"),
		leasehold.WithKeyPrefix(prefix),
		leasehold.WithRetention(time.Minute),
		leasehold.WithHooks(leasehold.Hooks{
			OnDone: func(_ context.Context, job *leasehold.Job, _ []byte, _ error) { finished <- job.Key },
			OnReplay: func(_ context.Context, info leasehold.ClaimInfo, result []byte, _ string) {
				say.Printf("duplicate %s: not run again, cached result %s", info.Key, result)
				finished <- info.Key
			},
		}),
	)
	if err != nil {
		return err
	}

	// The handler is where the side effect happens: here, sending an email
	// that nobody wants twice. Typed decodes the JSON payload and encodes
	// the result, which is cached under the job's idempotency key.
	err = w.Register("email.welcome", leasehold.Typed(
		func(ctx context.Context, job *leasehold.Job, s signup) (sent, error) {
			say.Printf("handler   %s: sending a welcome email to %s (attempt %d)", job.Key, s.Email, job.Attempt)
			return sent{MessageID: "msg-" + job.Key}, nil
		}))
	if err != nil {
		return err
	}
	if err := w.Start(ctx); err != nil {
		return err
	}
	defer func() {
		if err := w.Shutdown(context.WithoutCancel(ctx)); err != nil {
			say.Printf("shutdown: %v", err)
		}
	}()

	// The producer: any franz-go client. Enqueue sets the idempotency key
	// and job type headers; the key should come from your domain (here a
	// signup id), so that sending the same job again is recognised.
	producer, err := kgo.NewClient(kgo.SeedBrokers(kafka.ListenAddrs()...), kgo.DefaultProduceTopic(topic))
	if err != nil {
		return err
	}
	defer producer.Close()
	jobs := []leasehold.NewJob{
		{Type: "email.welcome", Key: "signup-1", Payload: []byte(`{"email":"ada@example.com"}`)},
		{Type: "email.welcome", Key: "signup-2", Payload: []byte(`{"email":"grace@example.com"}`)},
		{Type: "email.welcome", Key: "signup-3", Payload: []byte(`{"email":"edsger@example.com"}`)},
	}
	say.Printf("producer  enqueues %d jobs", len(jobs))
	if _, err := leasehold.EnqueueBatch(ctx, producer, jobs); err != nil {
		return err
	}
	if err := waitFor(ctx, finished, len(jobs)); err != nil {
		return err
	}

	// A producer whose acknowledgement got lost sends the job again: same
	// key, same payload. Kafka delivers it; leasehold does not run it.
	say.Printf("producer  enqueues %s again", jobs[0].Key)
	if _, err := leasehold.Enqueue(ctx, producer, jobs[0]); err != nil {
		return err
	}
	if err := waitFor(ctx, finished, 1); err != nil {
		return err
	}

	st := w.Stats()
	say.Printf("worker    handlers succeeded: %d, duplicates replayed: %d", st.Succeeded, st.Replayed)
	return nil
}

// waitFor waits until n records are finished.
func waitFor(ctx context.Context, finished <-chan string, n int) error {
	for range n {
		select {
		case <-finished:
		case <-ctx.Done():
			return fmt.Errorf("waiting for the jobs: %w", context.Cause(ctx))
		}
	}
	return nil
}

// deleteKeys removes the example's keys (every key under prefix) once the
// worker has stopped, so that the run leaves nothing behind.
func deleteKeys(ctx context.Context, rdb *redis.Client, prefix string) error {
	var keys []string
	iter := rdb.Scan(ctx, 0, prefix+"*", 100).Iterator()
	for iter.Next(ctx) {
		keys = append(keys, iter.Val())
	}
	if err := iter.Err(); err != nil || len(keys) == 0 {
		return err
	}
	return rdb.Unlink(ctx, keys...).Err()
}
