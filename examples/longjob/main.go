// Command longjob runs one long job that stores a resume checkpoint with
// every heartbeat, loses its lease half-way (the example expires it in
// Redis, as `worker expire KEY` does), sees its context cancelled with
// leasehold.ErrLeaseLost, and is run again from the checkpoint rather than
// from the start.
//
// It needs a Redis server (REDIS_URL, default redis://127.0.0.1:6379) and
// starts an in-process Kafka (franz-go's kfake):
//
//	go run ./examples/longjob
package main

import (
	"cmp"
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"io"
	"log"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/leasehold/leasehold"
	"github.com/leasehold/leasehold/idempotency"
	"github.com/leasehold/leasehold/lease"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	redisURL := cmp.Or(os.Getenv("REDIS_URL"), "redis://127.0.0.1:6379")
	if err := run(ctx, os.Stdout, redisURL); err != nil {
		fmt.Fprintln(os.Stderr, "longjob:", err)
		os.Exit(1)
	}
}

const (
	topic     = "longjob.jobs"
	jobKey    = "report-2026-11"
	chunks    = 8                      // the job's work, in chunks
	chunkTime = 250 * time.Millisecond // how long one chunk takes
	expireAt  = 3                      // the checkpoint after which the lease is expired
)

// run enqueues the long job, expires its lease once it has stored
// checkpoint expireAt, and returns when the job has completed (or ctx ends).
func run(ctx context.Context, out io.Writer, redisURL string) error {
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	say := log.New(out, "", 0)

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
	prefix := "longjob:" + strings.ToLower(rand.Text()[:8]) + ":"
	defer func() {
		if err := deleteKeys(context.WithoutCancel(ctx), rdb, prefix); err != nil {
			say.Printf("cleanup: %v", err)
		}
	}()
	checkpoints := make(chan int, chunks*2) // checkpoints stored by the first attempt
	completed := make(chan []byte, 1)
	w, err := leasehold.New(rdb,
		leasehold.WithKafka(kgo.SeedBrokers(kafka.ListenAddrs()...)),
		leasehold.WithTopics(topic),
		leasehold.WithGroup("longjob"),
		leasehold.WithKeyPrefix(prefix),
		leasehold.WithRetention(time.Minute),
		// A short lease so that the loss shows quickly: the worker renews
		// it every 500ms. A worker that dies is replaced once its Kafka
		// session times out (6s: below a 12s lease the session timeout
		// stays at its floor; see docs/worker.md). The default is 15s.
		leasehold.WithLeaseTTL(1500*time.Millisecond),
		// Store every heartbeat (chunks take 250ms). By default heartbeats
		// are stored at most once per lease TTL / 3; the latest one wins.
		leasehold.WithHeartbeatThrottle(50*time.Millisecond),
		leasehold.WithHooks(leasehold.Hooks{
			OnHeartbeat: func(_ context.Context, job *leasehold.Job, details []byte) {
				say.Printf("attempt %d: checkpoint %s stored", job.Attempt, details)
				if n, err := strconv.Atoi(string(details)); err == nil && job.Attempt == 1 {
					checkpoints <- n
				}
			},
			OnDone: func(_ context.Context, _ *leasehold.Job, result []byte, err error) {
				if err == nil {
					completed <- result
				}
			},
		}),
	)
	if err != nil {
		return err
	}
	err = w.Register("report.build", func(ctx context.Context, job *leasehold.Job) ([]byte, error) {
		// Resume where the previous attempt stopped: its last heartbeat.
		from := 0
		if cp := job.LastHeartbeat(); cp != nil {
			n, err := strconv.Atoi(string(cp))
			if err != nil {
				return nil, leasehold.Permanent(fmt.Errorf("bad checkpoint %q: %w", cp, err))
			}
			from = n
		}
		say.Printf("attempt %d: starts at chunk %d of %d (fence %d, takeover %t)",
			job.Attempt, from+1, chunks, job.Fence(), job.Takeover)
		for chunk := from + 1; chunk <= chunks; chunk++ {
			// Work that watches ctx: when the lease is lost, ctx is
			// cancelled with cause ErrLeaseLost and the handler must stop,
			// because another attempt, with a newer fence, takes over.
			select {
			case <-ctx.Done():
				return nil, stopped(say, job, chunk, context.Cause(ctx))
			case <-time.After(chunkTime):
			}
			// Heartbeat stores the checkpoint that the next attempt reads
			// with LastHeartbeat; once the lease is lost it is refused.
			if err := job.Heartbeat(ctx, []byte(strconv.Itoa(chunk))); err != nil {
				return nil, stopped(say, job, chunk, err)
			}
		}
		return []byte("report of " + strconv.Itoa(chunks) + " chunks"), nil
	},
		// Retry soon after a failure or a lost lease (default 1s up to 1m).
		leasehold.WithBackoff(100*time.Millisecond, time.Second))
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

	// The Redis key of the job's lease, to expire it below.
	leaseKey, err := leaseKeyOf(ctx, rdb, prefix, jobKey)
	if err != nil {
		return err
	}
	producer, err := kgo.NewClient(kgo.SeedBrokers(kafka.ListenAddrs()...), kgo.DefaultProduceTopic(topic))
	if err != nil {
		return err
	}
	defer producer.Close()
	if _, err := leasehold.Enqueue(ctx, producer, leasehold.NewJob{Type: "report.build", Key: jobKey}); err != nil {
		return err
	}

	// Wait for the first attempt's checkpoint expireAt, then take its lease
	// away, as an operator would or as a long pause of the worker would.
	for cp := 0; cp < expireAt; {
		select {
		case cp = <-checkpoints:
		case <-ctx.Done():
			return fmt.Errorf("waiting for checkpoint %d: %w", expireAt, context.Cause(ctx))
		}
	}
	// Deleting the key ends the lease as if its holder had stopped renewing
	// it: the holder's next renewal finds it gone, and the next claim of the
	// key is a takeover with a newer fence. (A TTL of 1 ms instead would lose
	// to a renewal that reached Redis within that millisecond.)
	n, err := rdb.Del(ctx, leaseKey).Result()
	if err != nil {
		return fmt.Errorf("expire the lease: %w", err)
	}
	if n == 0 {
		return fmt.Errorf("no lease held for %s (Redis key %s)", jobKey, leaseKey)
	}
	say.Printf("example:  expired the lease of %s in Redis", jobKey)

	select {
	case result := <-completed:
		say.Printf("completed: %s", result)
	case <-ctx.Done():
		return fmt.Errorf("waiting for the job to complete: %w", context.Cause(ctx))
	}
	return nil
}

// stopped reports why an attempt stops early and returns its error.
func stopped(say *log.Logger, job *leasehold.Job, chunk int, err error) error {
	say.Printf("attempt %d: stops in chunk %d: %v (errors.Is(err, leasehold.ErrLeaseLost) = %t)",
		job.Attempt, chunk, err, errors.Is(err, leasehold.ErrLeaseLost))
	return err
}

// leaseKeyOf returns the Redis key of the lease that guards an idempotency
// key, as `worker expire KEY` finds it: the idempotency store names the
// lease of a key, the lease manager gives that lease's Redis key, both under
// the worker's key prefix.
func leaseKeyOf(ctx context.Context, rdb redis.UniversalClient, prefix, key string) (string, error) {
	m, err := lease.NewManager(rdb, lease.WithPrefix(prefix))
	if err != nil {
		return "", err
	}
	s, err := idempotency.New(ctx, rdb, m, idempotency.WithPrefix(prefix))
	if err != nil {
		return "", err
	}
	return m.Key(s.LeaseName(key)), nil
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
