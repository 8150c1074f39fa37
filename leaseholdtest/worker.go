package leaseholdtest

import (
	"context"
	"crypto/rand"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/twmb/franz-go/pkg/kfake"
)

// KafkaPartitions is the number of partitions of each topic [Kafka] creates
// (their dead-letter topics have one).
const KafkaPartitions = 3

// Kafka starts an in-process Kafka (franz-go's kfake, one broker) holding
// topics and their dead-letter topics (<topic>.dlq, the worker's default),
// closes it at t's cleanup, and returns its seed brokers for kgo.SeedBrokers.
// It keeps records in memory only. With a Redis server and [KeyPrefix], a
// whole-worker test is one line of setup:
//
//	w, err := leasehold.New(rdb, leasehold.WithKafka(kgo.SeedBrokers(leaseholdtest.Kafka(t, "jobs")...)),
//		leasehold.WithTopics("jobs"), leasehold.WithKeyPrefix(leaseholdtest.KeyPrefix(t, rdb)))
func Kafka(t testing.TB, topics ...string) []string {
	t.Helper()
	dlqs := make([]string, len(topics))
	for i, tp := range topics {
		dlqs[i] = tp + ".dlq"
	}
	c, err := kfake.NewCluster(kfake.NumBrokers(1),
		kfake.SeedTopics(KafkaPartitions, topics...), kfake.SeedTopics(1, dlqs...))
	if err != nil {
		t.Fatalf("leaseholdtest: start kfake: %v", err)
	}
	t.Cleanup(c.Close)
	return c.ListenAddrs()
}

// KeyPrefix returns a Redis key prefix of t's own for
// leasehold.WithKeyPrefix, so that tests sharing a Redis do not meet, and
// deletes the keys under it from rdb at t's cleanup (SCAN and UNLINK; on a
// Cluster, on every master).
func KeyPrefix(t testing.TB, rdb redis.UniversalClient) string {
	t.Helper()
	prefix := "lht:" + strings.ToLower(rand.Text()[:16]) + ":"
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		del := func(ctx context.Context, c redis.UniversalClient) error { return deletePrefix(ctx, c, prefix) }
		var err error
		if cc, ok := rdb.(*redis.ClusterClient); ok {
			err = cc.ForEachMaster(ctx, func(ctx context.Context, n *redis.Client) error { return del(ctx, n) })
		} else {
			err = del(ctx, rdb)
		}
		if err != nil {
			t.Errorf("leaseholdtest: delete keys %s*: %v", prefix, err)
		}
	})
	return prefix
}

func deletePrefix(ctx context.Context, c redis.UniversalClient, prefix string) error {
	var cursor uint64
	for {
		keys, next, err := c.Scan(ctx, cursor, prefix+"*", 1000).Result()
		if err != nil {
			return err
		}
		for _, k := range keys { // one by one: a Cluster master's keys span slots
			if err := c.Unlink(ctx, k).Err(); err != nil {
				return err
			}
		}
		if cursor = next; cursor == 0 {
			return nil
		}
	}
}
