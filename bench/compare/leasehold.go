package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/leasehold/leasehold"
	"github.com/leasehold/leasehold/idempotency"
)

// leaseholdRun runs one worker (concurrency conc, no-op handler) over n
// distinct jobs already in an embedded Kafka topic of partitions
// partitions, and measures between warm and n jobs succeeded.
func leaseholdRun(ctx context.Context, rdb *redis.Client, run, n, warm, partitions, conc int) (window, error) {
	topic := fmt.Sprintf("compare.%d", run)
	b, err := startBroker(ctx, topic, partitions, n, "bench.noop", fmt.Sprintf("lh%d", run))
	if err != nil {
		return window{}, err
	}
	defer b.stop()
	return leaseholdWorker(ctx, rdb, b.addrs, topic, topic, n, warm, conc)
}

// leaseholdWorker runs one worker (concurrency conc, no-op handler) over
// the n jobs of topic on the brokers at addrs and measures between warm and
// n jobs succeeded, as a member of group (new, so that it reads the topic
// from its start).
func leaseholdWorker(ctx context.Context, rdb *redis.Client, addrs []string, topic, group string, n, warm, conc int) (window, error) {
	w, err := leasehold.New(rdb,
		leasehold.WithKafka(kgo.SeedBrokers(addrs...)),
		leasehold.WithTopics(topic),
		leasehold.WithGroup(group),
		leasehold.WithRetention(10*time.Minute),
		leasehold.WithConcurrency(conc),
		leasehold.WithCommitInterval(200*time.Millisecond),
		leasehold.WithLogger(slog.New(slog.NewTextHandler(io.Discard, nil))),
		leasehold.WithIdempotencyOptions(storeOpts()...),
	)
	if err != nil {
		return window{}, err
	}
	if err := w.Register("bench.noop", func(context.Context, *leasehold.Job) ([]byte, error) { return nil, nil }); err != nil {
		return window{}, err
	}
	if err := w.Start(ctx); err != nil {
		return window{}, err
	}
	defer func() {
		sctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		defer cancel()
		_ = w.Shutdown(sctx)
	}()
	done := func() int64 { return w.Stats().Succeeded }
	return steady(ctx, rdb, done, int64(warm), int64(n), 10*time.Minute)
}

// historyLen is the attempts the worker's store keeps per key (-history);
// shards its shard count (-shards, 0: the default); windows the windows its
// retention is cut into (-windows, 0: the default).
var (
	historyLen = idempotency.DefaultHistory
	shards     int
	windows    int
)

// storeOpts are the idempotency options of the -history, -shards and
// -windows flags.
func storeOpts() []idempotency.Opt {
	opts := []idempotency.Opt{idempotency.WithHistory(historyLen)}
	if shards > 0 {
		opts = append(opts, idempotency.WithShards(shards))
	}
	if windows > 0 {
		opts = append(opts, idempotency.WithWindows(windows))
	}
	return opts
}
