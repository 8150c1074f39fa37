package leasehold

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
)

// topicWait is how long Start waits for a topic to appear in the brokers'
// metadata: a topic created just before the worker starts may take a moment
// to reach every broker.
const topicWait = 5 * time.Second

// checkTopics fails with [ErrTopicMissing] when the brokers answer that any
// of topics does not exist, after waiting up to topicWait for it to appear.
// Brokers that cannot be reached within topicWait say nothing about the
// topics: the check is skipped (logged at WARN) and the worker starts as it
// would without it, its client retrying until Kafka is back (a worker
// restarted during a broker outage must not exit). It asks through a client
// of its own, made from the worker's connection options (kopts), before the
// group client exists: a group client joins at once.
func checkTopics(ctx context.Context, log *slog.Logger, kopts []kgo.Opt, topics []string) error {
	cl, err := kgo.NewClient(kopts...)
	if err != nil {
		return fmt.Errorf("leasehold: kafka client: %w", err)
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	deadline := time.Now().Add(topicWait)
	for {
		lctx, cancel := context.WithTimeout(ctx, topicWait)
		details, err := adm.ListTopics(lctx, topics...)
		cancel()
		if err != nil {
			if ctx.Err() != nil {
				return ctx.Err()
			}
			log.Warn("could not read topic metadata from Kafka; starting without checking that the topics exist",
				slog.Any("topics", topics), slog.Any("err", err))
			return nil
		}
		var missing []string
		for _, t := range topics {
			d, ok := details[t]
			switch {
			case !ok, errors.Is(d.Err, kerr.UnknownTopicOrPartition):
				missing = append(missing, t)
			case d.Err != nil && !errors.Is(d.Err, kerr.LeaderNotAvailable):
				return fmt.Errorf("leasehold: topic %s: %w", t, d.Err)
			}
		}
		if len(missing) == 0 {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%w: %s; create it on the cluster before starting the worker "+
				"(the worker never creates topics; the dead-letter topic is the first topic + .dlq unless set)",
				ErrTopicMissing, strings.Join(missing, ", "))
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(250 * time.Millisecond):
		}
	}
}
